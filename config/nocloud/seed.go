package nocloud

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/berth-node/berth/config/userdata"
	yaml "go.yaml.in/yaml/v3"
)

// The files of a seed, at its root, named as cloud-init names them.
const (
	FileUserData      = "user-data"
	FileMetaData      = "meta-data"
	FileNetworkConfig = "network-config"
	FileVendorData    = "vendor-data"
)

// MaxFileSize caps meta-data and network-config. Real ones are well
// under a kilobyte; the cap keeps a mistaken or hostile seed from costing
// PID 1 memory.
const MaxFileSize = 64 << 10

// MaxUserDataSize caps user-data as the user-data path caps a file it is
// given (userdata.MaxDecodedSize). EC2's 16 KiB limit does not apply to a
// seed.
const MaxUserDataSize = userdata.MaxDecodedSize

// IsSeedLabel reports whether a filesystem label marks a NoCloud seed:
// cidata or CIDATA, as cloud-init looks for them (it tries the label in
// upper and in lower case, nothing in between).
func IsSeedLabel(label string) bool { return label == "cidata" || label == "CIDATA" }

// Seed is what a NoCloud seed holds, parsed as far as this package goes.
type Seed struct {
	// UserData is user-data's bytes, unparsed. It goes to the user-data
	// path berth already has (userdata.DecodeNamed with the source name
	// "seed user-data", then nodeconfig), which takes every format berth
	// reads: NodeConfig, MIME, Bottlerocket TOML, AL2 scripts, gzip.
	UserData []byte   `json:"-"`
	MetaData MetaData `json:"metaData"`
	// Network is network-config's content; nil when the seed has no
	// network-config, an empty one, or one that says config: disabled.
	Network *Network `json:"network,omitempty"`
	// Warnings are what berth ignores in the seed, file by file.
	Warnings []Problem `json:"warnings,omitempty"`
}

// Read reads a seed from the root of fsys (os.DirFS of the mounted
// volume or of a directory). user-data and meta-data must both be there,
// as cloud-init requires; network-config is optional. The error is a
// Problems naming the file, or an I/O error naming it.
func Read(fsys fs.FS) (*Seed, error) {
	s := &Seed{}
	ud, err := readFile(fsys, FileUserData, MaxUserDataSize)
	if err != nil {
		return nil, err
	}
	s.UserData = ud
	md, err := readFile(fsys, FileMetaData, MaxFileSize)
	if err != nil {
		return nil, err
	}
	var warns []Problem
	s.MetaData, warns, err = ParseMetaData(md)
	s.Warnings = append(s.Warnings, warns...)
	if err != nil {
		return nil, err
	}
	nc, err := readFile(fsys, FileNetworkConfig, MaxFileSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		s.Network, warns, err = ParseNetworkConfig(nc)
		s.Warnings = append(s.Warnings, warns...)
		if err != nil {
			return nil, err
		}
	}
	if _, err := fs.Stat(fsys, FileVendorData); err == nil {
		s.Warnings = append(s.Warnings, Problem{File: FileVendorData, Message: "ignored: berth reads user-data only"})
	}
	return s, nil
}

// readFile reads name, refusing more than limit bytes. A missing
// user-data or meta-data is a Problem saying what a seed needs; a missing
// network-config is fs.ErrNotExist.
func readFile(fsys fs.FS, name string, limit int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && name != FileNetworkConfig {
			return nil, Problems{{File: name, Message: "missing: a NoCloud seed holds user-data and meta-data (meta-data may be empty)"}}
		}
		return nil, fmt.Errorf("reading the seed's %s: %w", name, err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, Problems{{File: name, Message: "is a directory; want a file"}}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, fmt.Errorf("reading the seed's %s: %w", name, err)
	}
	if len(data) > limit {
		return nil, Problems{{File: name, Message: fmt.Sprintf("over the %d-byte limit", limit)}}
	}
	return data, nil
}

func sizeMessage(n int) string {
	return fmt.Sprintf("%d bytes, over the %d-byte limit (nocloud.MaxFileSize)", n, MaxFileSize)
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }
