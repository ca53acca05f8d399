// Package manifest defines the image manifest: the facts the image builder
// knew when it built an image (component versions, the pause image, the
// kernel modules, every file and its digest). berth reads it at boot instead
// of asking binaries about themselves, so the plan stays a pure function.
package manifest

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/berth-node/berth/config/accepts"
)

// DefaultPath is where the manifest lives inside a booted image.
const DefaultPath = "/etc/berth/manifest.json"

// Manifest is written by image/ and read by berth at boot and by
// `berth render --manifest`.
type Manifest struct {
	// BerthVersion is the version stamped into the berth binary in the image.
	BerthVersion string `json:"berthVersion"`
	// KernelVersion is the uname -r of the kernel the image was built for.
	KernelVersion string `json:"kernelVersion"`
	// Arch is the architecture every binary and module in the image is
	// for, by Go's name (amd64, arm64). Empty in images built before it
	// was recorded, which were all amd64 (LegacyArch).
	Arch string `json:"arch,omitempty"`
	// Components maps a component name (kubelet, containerd, runc, cni,
	// etcd...) to its version, for example "kubelet": "v1.35.4".
	Components map[string]string `json:"components,omitempty"`
	// Accepts is what the image's kubelet and containerd accept in their
	// configuration (flags, feature gates, field types...), generated at
	// build from their Go modules; validation checks user data against
	// it. Nil in images built before it was recorded.
	Accepts *accepts.Accepts `json:"accepts,omitempty"`
	// SandboxImage is the pause image reference containerd is configured with.
	SandboxImage string `json:"sandboxImage,omitempty"`
	// Images are OCI image tarballs baked into the image, imported into
	// containerd's k8s.io namespace after containerd is ready.
	Images []Image `json:"images,omitempty"`
	// Modules are every kernel module shipped, by name (no .ko suffix).
	Modules []string `json:"modules,omitempty"`
	// EarlyModules are the modules the initramfs carries, the ones loaded
	// before the root is mounted. When set, every module (with its index)
	// is also in the root image under /lib/modules, which serves the rest
	// of boot, and the initramfs's copies are released after the switch.
	// An image without it (older builds) has its modules only in the
	// initramfs, and the switch carries them into the root.
	EarlyModules []string `json:"earlyModules,omitempty"`
	// Preload are modules loaded at boot whatever the hardware, in order.
	Preload []string `json:"preload,omitempty"`
	// KernelArgs are the image's kernel command-line words (the spec's
	// kernelArgs): the disk's UKI carries them, and a direct-kernel boot
	// of the image passes them (the QEMU harness reads them from here).
	KernelArgs []string `json:"kernelArgs,omitempty"`
	// Tools are external programs the image ships for berth to call
	// (mkfs.xfs, mkfs.ext4...), by name to absolute path.
	Tools map[string]string `json:"tools,omitempty"`
	// Files lists every file in the image with its digest, sorted by path.
	Files []File `json:"files,omitempty"`
	// Root describes the read-only root filesystem image, when there is one.
	Root *Root `json:"root,omitempty"`
	// Disk describes the bootable disk image (make disk), in the
	// manifest.json written beside it only: the disk holds the manifest, so
	// the one inside cannot know the disk's digest.
	Disk *Disk `json:"disk,omitempty"`
	// Update is what the image carries for in-place updates from a TUF
	// repository (package update/repo): the root.json it trusts and the
	// repository it asks unless user data names another. Nil in an image
	// built without an update root (make keys makes one), which cannot
	// update in place.
	Update *Update `json:"update,omitempty"`
}

// TrustedRootPath is where an image's trusted update root.json lives: in
// the root filesystem, read-only and under dm-verity, so it is as trusted
// as the UKI that names the root hash.
const TrustedRootPath = "/usr/share/berth/update/root.json"

// Update is the image's update trust.
type Update struct {
	// TrustedRoot is the path, in the image's root filesystem, of the TUF
	// root.json whose keys sign the releases this node takes
	// (TrustedRootPath).
	TrustedRoot string `json:"trustedRoot"`
	// Repository is the default repository's URL (its metadata base,
	// http or https); empty when the image names none and user data must
	// (the berth.dev/update-repository annotation).
	Repository string `json:"repository,omitempty"`
}

// LegacyArch is what a manifest without Arch is for: until the builder
// recorded the architecture it could only build amd64 (berth and its Go
// helpers were built with GOARCH=amd64 fixed, from amd64 Debian packages).
const LegacyArch = "amd64"

// CheckArch returns an error when the image is for another architecture
// than goarch, the running berth's (runtime.GOARCH): its kubelet,
// containerd, runc and modules would fail one by one, as "exec format
// error" and "Invalid module format", long after the cause. A manifest
// without Arch is taken as LegacyArch, and note says so: refusing it would
// stop every image built before the field from booting, and accepting it
// on arm64 would boot amd64 binaries.
func (m *Manifest) CheckArch(goarch string) (note string, err error) {
	arch := m.Arch
	if arch == "" {
		arch = LegacyArch
		note = "the image manifest records no architecture (built before it did): taken as " + LegacyArch
	}
	if arch != goarch {
		return note, fmt.Errorf("the image is for %s but this berth runs on %s: its binaries and kernel modules "+
			"cannot run here; boot an image built with ARCH=%s", arch, goarch, goarch)
	}
	return note, nil
}

// Disk is the GPT disk image built from the same spec as the initramfs.
type Disk struct {
	Path   string `json:"path"` // file name beside the manifest, disk.raw
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Cmdline is the command line in the UKI, berth.verity= included.
	// It names no root slot: berth boots from the slot whose dm-verity
	// tree has the root hash.
	Cmdline string `json:"cmdline"`
	// UKI is the UKI's path on the ESP (EFI/Linux/berth-<version>.efi),
	// and Slot the root slot the disk image holds the root in (a).
	UKI  string `json:"uki,omitempty"`
	Slot string `json:"slot,omitempty"`
	// UKIFile is the same UKI as a file beside the manifest (berth.efi),
	// with its size and sha256: what `make update-repo` publishes as the
	// release's UKI. Empty in manifests from before it was written.
	UKIFile   string `json:"ukiFile,omitempty"`
	UKISize   int64  `json:"ukiSize,omitempty"`
	UKISHA256 string `json:"ukiSHA256,omitempty"`
	// SignedBy is the certificate systemd-boot and the UKI are signed
	// with for UEFI Secure Boot; nil for an unsigned disk, which boots
	// only with Secure Boot off.
	SignedBy *DiskSigner `json:"signedBy,omitempty"`
	// EnrollKeys says the ESP carries the Secure Boot keys for
	// systemd-boot to enroll on a machine in setup mode.
	EnrollKeys bool `json:"enrollKeys,omitempty"`
}

// DiskSigner names the db certificate a disk is signed with.
type DiskSigner struct {
	Subject string `json:"subject"`
	// CertSHA256 is the SHA-256 of the certificate's DER, hex.
	CertSHA256 string `json:"certSHA256"`
}

// Image is one OCI image tarball in the image.
type Image struct {
	Name string `json:"name"`
	Path string `json:"path"`
	// ID is the image's config digest for the image's architecture:
	// what the CRI calls the image's id and kubelet its imageRef, which
	// kubelet keys its records of pulled images by (the plan's preloaded
	// image records, runtime/kubelet). Empty in manifests from before it.
	ID string `json:"id,omitempty"`
}

// File is one file in the image.
type File struct {
	Path   string `json:"path"`
	Mode   string `json:"mode"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256,omitempty"`
	Link   string `json:"link,omitempty"`
}

// Root describes the read-only root filesystem image.
type Root struct {
	Path   string `json:"path,omitempty"`
	Format string `json:"format"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// RootHash is the dm-verity root hash (hex) of the root filesystem
	// as it sits on a disk image's berth-root partition.
	RootHash string `json:"rootHash,omitempty"`
	// Partition is the GPT partition name holding the root on a disk
	// image (Path is then empty: there is no root image file).
	Partition string `json:"partition,omitempty"`
	// Serial names the root disk of a direct-kernel boot (Path is then
	// empty): root.erofs, its dm-verity hash tree appended, attached
	// read-only as a whole disk with this serial (virtio-blk in QEMU).
	// It keeps the root image out of the initramfs, which the kernel
	// would otherwise unpack whole before berth runs.
	Serial string `json:"serial,omitempty"`
	// Verity is that root disk's dm-verity parameters, in berth.verity='s
	// form (mounts/verity.ParseParam). They come from the initramfs, as
	// berth itself does, so the root is as trusted as /init.
	Verity string `json:"verity,omitempty"`
}

// Parse decodes a manifest. Unknown fields are ignored so that an older
// berth can still boot an image from a newer builder.
func Parse(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding image manifest: %w", err)
	}
	return &m, nil
}

// ParseDeferred is Parse that leaves Accepts undecoded and returns it
// raw, for DecodeAccepts: it is most of the manifest's decoding (3.3 of
// 4.9 ms on the build host, about ten times that under TCG), and only the
// config phase needs it, so PID 1 decodes it beside the phases before
// (and keeps none of it once the config is checked).
func ParseDeferred(data []byte) (*Manifest, json.RawMessage, error) {
	var m Manifest
	// The outer field is shallower than the embedded Manifest's, so
	// encoding/json gives "accepts" to it alone.
	w := struct {
		*Manifest
		Accepts json.RawMessage `json:"accepts,omitempty"`
	}{Manifest: &m}
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, nil, fmt.Errorf("decoding image manifest: %w", err)
	}
	return &m, w.Accepts, nil
}

// DecodeAccepts decodes ParseDeferred's raw accepts: nil for an image
// built before the manifest recorded them.
func DecodeAccepts(raw json.RawMessage) (*accepts.Accepts, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var a accepts.Accepts
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("decoding the image manifest's accepts: %w", err)
	}
	return &a, nil
}

// LoadDeferred reads the manifest at path as ParseDeferred does.
func LoadDeferred(path string) (*Manifest, json.RawMessage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading image manifest: %w", err)
	}
	m, raw, err := ParseDeferred(data)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, raw, nil
}

// Load reads and parses the manifest at path.
func Load(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading image manifest: %w", err)
	}
	m, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}
