package publish

import (
	"slices"

	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/berth-node/berth/image/secureboot"
	"github.com/berth-node/berth/image/secureboot/uefidata"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// LoadImage reads dir/manifest.json and checks that the disk beside it is
// the one it describes: its size, and its sha256 (read whole once: a disk
// changed since the build must not be published under its name).
func LoadImage(dir string) (Image, error) {
	mpath := filepath.Join(dir, "manifest.json")
	data, err := os.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return Image{}, fmt.Errorf("%s does not exist: %w", mpath, ErrNoDisk)
	}
	if err != nil {
		return Image{}, fmt.Errorf("reading the image manifest: %w", err)
	}
	img, err := ParseManifest(data, mpath)
	if err != nil {
		return Image{}, err
	}
	f, err := os.Open(img.DiskPath)
	if errors.Is(err, fs.ErrNotExist) {
		return Image{}, fmt.Errorf("%s names the disk %s, which does not exist: %w", mpath, img.DiskPath, ErrNoDisk)
	}
	if err != nil {
		return Image{}, fmt.Errorf("opening the disk: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Image{}, fmt.Errorf("the disk %s: %w", img.DiskPath, err)
	}
	if st.Size() != img.Size {
		return Image{}, fmt.Errorf("the disk %s is %d bytes but %s says %d: it is not the disk the manifest describes (run make disk again)", img.DiskPath, st.Size(), mpath, img.Size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Image{}, fmt.Errorf("hashing the disk %s: %w", img.DiskPath, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != img.SHA256 {
		return Image{}, fmt.Errorf("the disk %s has sha256 %s but %s says %s: it is not the disk the manifest describes (run make disk again)", img.DiskPath, got, mpath, img.SHA256)
	}
	return img, nil
}

// DataExtents maps where f's first size bytes hold data, with
// SEEK_DATA/SEEK_HOLE. A filesystem without them reports the whole file
// as data (Linux's generic fallback), which uploads every block: slower,
// never wrong.
func DataExtents(f *os.File, size int64) ([]Extent, error) {
	fd := int(f.Fd())
	var out []Extent
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data past off
		}
		if err != nil {
			return nil, fmt.Errorf("SEEK_DATA at %d in %s: %w", off, f.Name(), err)
		}
		if data >= size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("SEEK_HOLE at %d in %s: %w", data, f.Name(), err)
		}
		hole = min(hole, size)
		out = append(out, Extent{Off: data, Len: hole - data})
		off = hole
	}
	return out, nil
}

// LoadUEFIData reads the uefi-data file make keys writes: EC2's UEFI
// variable store as base64 text, handed to RegisterImage as it is.
func LoadUEFIData(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the UEFI variable store: %w", err)
	}
	text := strings.TrimSpace(string(b))
	raw, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return "", fmt.Errorf("%s is not base64 text (EC2's uefi-data, as make keys writes it): %w", path, err)
	}
	if len(raw) < 8 || string(raw[:8]) != "AMZNUEFI" {
		return "", fmt.Errorf("%s does not hold EC2's uefi-data (no AMZNUEFI magic)", path)
	}
	if len(text) > 64<<10 {
		return "", fmt.Errorf("%s is %d bytes of base64; RegisterImage takes at most 64 KiB", path, len(text))
	}
	return text, nil
}

// CheckKeys refuses an AMI that could not boot: EC2 starts an instance of
// an AMI registered with uefiB64 (EC2's uefi-data) with Secure Boot on and
// those keys enrolled, so the disk must be signed, with a certificate that
// uefi-data's db holds. An empty uefiB64 (no keys: Secure Boot off) boots
// any disk.
func CheckKeys(img Image, uefiB64 string) error {
	if uefiB64 == "" {
		return nil
	}
	if img.SignerCertSHA256 == "" {
		return fmt.Errorf("%s is unsigned, but the AMI would start with Secure Boot on and the uefi-data's keys, and refuse it: sign the disk (make keys, make disk) or publish without keys (-uefi-data none)", img.DiskPath)
	}
	vars, err := uefidata.Decode([]byte(uefiB64))
	if err != nil {
		return fmt.Errorf("reading the uefi-data: %w", err)
	}
	for _, v := range vars {
		if v.Name != "db" || v.GUID != uefidata.ImageSecurityDatabaseGUID() {
			continue
		}
		fps, err := secureboot.CertFingerprints(v.Data)
		if err != nil {
			return fmt.Errorf("reading the uefi-data's db: %w", err)
		}
		if slices.Contains(fps, img.SignerCertSHA256) {
			return nil
		}
		return fmt.Errorf("the uefi-data's db holds certificates %v, not %s that %s is signed with: the AMI would refuse to boot it (sign the disk with these keys, or publish with the keys it was signed with)",
			fps, img.SignerCertSHA256, img.DiskPath)
	}
	return fmt.Errorf("the uefi-data has no db variable: the AMI would refuse to boot %s", img.DiskPath)
}
