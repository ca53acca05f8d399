package devlinks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nvmeAdminCmd is the kernel's struct nvme_admin_cmd (linux/nvme_ioctl.h).
type nvmeAdminCmd struct {
	Opcode      uint8
	Flags       uint8
	Rsvd1       uint16
	NSID        uint32
	Cdw2, Cdw3  uint32
	Metadata    uint64
	Addr        uint64
	MetadataLen uint32
	DataLen     uint32
	Cdw10       uint32
	Cdw11       uint32
	Cdw12       uint32
	Cdw13       uint32
	Cdw14       uint32
	Cdw15       uint32
	TimeoutMs   uint32
	Result      uint32
}

const (
	// nvmeIoctlAdminCmd is _IOWR('N', 0x41, struct nvme_admin_cmd).
	nvmeIoctlAdminCmd = 3<<30 | uint32(unsafe.Sizeof(nvmeAdminCmd{}))<<16 | 'N'<<8 | 0x41
	nvmeAdminIdentify = 0x06
	cnsController     = 1
)

// ReadIdentify returns an IdentifyFunc that sends Identify Controller to
// the namespace's controller through its character device under devDir
// (normally /dev), as ebsnvme-id does.
func ReadIdentify(devDir string) IdentifyFunc {
	return func(disk, sysDir string) ([]byte, error) {
		ctrl, err := controllerOf(sysDir)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(devDir, ctrl)
		f, err := os.OpenFile(p, os.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("opening controller %s: %w", p, err)
		}
		defer f.Close()
		buf := make([]byte, IdentifySize)
		cmd := nvmeAdminCmd{
			Opcode:  nvmeAdminIdentify,
			Addr:    uint64(uintptr(unsafe.Pointer(&buf[0]))),
			DataLen: IdentifySize,
			Cdw10:   cnsController,
		}
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(nvmeIoctlAdminCmd), uintptr(unsafe.Pointer(&cmd)))
		runtime.KeepAlive(buf)
		if errno != 0 {
			return nil, fmt.Errorf("identify controller on %s: %w", p, errno)
		}
		return buf, nil
	}
}

// controllerOf names the controller behind a namespace's sysfs directory:
// its "device" link is the controller (it has a dev file), or with native
// multipath the NVMe subsystem, whose controllers are listed inside it.
func controllerOf(sysDir string) (string, error) {
	dev := filepath.Join(sysDir, "device")
	if _, err := os.Stat(filepath.Join(dev, "dev")); err == nil {
		real, err := filepath.EvalSymlinks(dev)
		if err != nil {
			return "", fmt.Errorf("resolving %s: %w", dev, err)
		}
		return filepath.Base(real), nil
	}
	ctrls, _ := filepath.Glob(filepath.Join(dev, "nvme[0-9]*"))
	sort.Strings(ctrls)
	for _, c := range ctrls {
		if _, err := os.Stat(filepath.Join(c, "dev")); err == nil {
			return filepath.Base(c), nil
		}
	}
	return "", errors.New("no controller with a device node under " + dev)
}
