package raid

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ControlPath is device-mapper's control node.
const ControlPath = "/dev/mapper/control"

// The ioctl interface version berth speaks; the kernel accepts any request
// whose major matches and whose minor is not newer than its own.
var dmVersion = [3]uint32{4, 0, 0}

const (
	dmIoctlSize = int(unsafe.Sizeof(unix.DmIoctl{}))
	dmSpecSize  = int(unsafe.Sizeof(unix.DmTargetSpec{}))
)

// Device is an active device-mapper device.
type Device struct {
	Name         string
	Major, Minor uint32
	Length       uint64 // sectors
	Table        string // the table loaded, when created by this call
}

// Dev is the kernel's major:minor string.
func (d Device) Dev() string { return fmt.Sprintf("%d:%d", d.Major, d.Minor) }

// Assemble creates the device-mapper device(s) for s and activates them:
// for RAID10 first the per-member metadata/data linear devices, then the
// array. If the array exists already (berth restarted within one boot) it
// is returned as is. The caller finds the node at /dev/dm-<minor>
// (devtmpfs) or makes it. On failure nothing created here is left behind.
func Assemble(ctx context.Context, control string, s Spec) (Device, error) {
	f, err := os.OpenFile(control, os.O_RDWR, 0)
	if err != nil {
		return Device{}, fmt.Errorf("opening device-mapper control %s (is dm_mod loaded?): %w", control, err)
	}
	defer f.Close()
	fd := int(f.Fd())
	if d, err := status(fd, s.Name); err == nil {
		return d, nil
	}
	var created []string
	undo := func(err error) (Device, error) {
		for i := len(created) - 1; i >= 0; i-- {
			if _, _, rerr := call(fd, unix.DM_DEV_REMOVE, created[i], "", 0, nil); rerr != nil {
				err = errors.Join(err, fmt.Errorf("removing %s again: %w", created[i], rerr))
			}
		}
		return Device{}, err
	}
	if s.Level == RAID10 {
		members := make([]Member, len(s.Members))
		for i, m := range s.Members {
			meta, data, err := Split(m.Dev, m.Sectors)
			if err != nil {
				return undo(fmt.Errorf("array %s: %w", s.Name, err))
			}
			var devs [2]Device
			for j, part := range []struct {
				suffix string
				t      Target
			}{{"m", meta}, {"d", data}} {
				name := fmt.Sprintf("%s-%s%d", s.Name, part.suffix, i)
				if err := ctx.Err(); err != nil {
					return undo(err)
				}
				d, err := create(fd, name, fmt.Sprintf("%s-%s%d", s.UUID, part.suffix, i), part.t)
				if err != nil {
					return undo(err)
				}
				created = append(created, name)
				devs[j] = d
			}
			members[i] = Member{MetaDev: devs[0].Dev(), Dev: devs[1].Dev(), Sectors: data.Length}
		}
		s.Members = members
	}
	t, err := Table(s)
	if err != nil {
		return undo(fmt.Errorf("array %s: %w", s.Name, err))
	}
	if err := ctx.Err(); err != nil {
		return undo(err)
	}
	d, err := create(fd, s.Name, s.UUID, t)
	if err != nil {
		return undo(err)
	}
	return d, nil
}

// CreateReadOnly creates a device with the one-target table t, loaded
// read-only (dm-verity refuses a writable table: "Device must be
// readonly"), and activates it. If a device of that name exists already
// (berth restarted within one boot) it is returned as is.
func CreateReadOnly(ctx context.Context, control, name, uuid string, t Target) (Device, error) {
	f, err := os.OpenFile(control, os.O_RDWR, 0)
	if err != nil {
		return Device{}, fmt.Errorf("opening device-mapper control %s (is dm_mod loaded?): %w", control, err)
	}
	defer f.Close()
	if d, err := status(int(f.Fd()), name); err == nil {
		return d, nil
	}
	if err := ctx.Err(); err != nil {
		return Device{}, err
	}
	return createFlags(int(f.Fd()), name, uuid, t, unix.DM_READONLY_FLAG)
}

// create makes one device, loads its one-target table and resumes it.
func create(fd int, name, uuid string, t Target) (Device, error) {
	return createFlags(fd, name, uuid, t, 0)
}

// createFlags is create with the table load's flags (DM_READONLY_FLAG).
func createFlags(fd int, name, uuid string, t Target, flags uint32) (Device, error) {
	h, _, err := call(fd, unix.DM_DEV_CREATE, name, uuid, 0, nil)
	if err != nil {
		return Device{}, fmt.Errorf("creating device-mapper device %s: %w", name, err)
	}
	dev := Device{Name: name, Major: unix.Major(h.Dev), Minor: unix.Minor(h.Dev), Length: t.Length, Table: t.String()}
	fail := func(err error) (Device, error) {
		if _, _, rerr := call(fd, unix.DM_DEV_REMOVE, name, "", 0, nil); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing %s again: %w", name, rerr))
		}
		return Device{}, err
	}
	if _, _, err := call(fd, unix.DM_TABLE_LOAD, name, "", flags, []Target{t}); err != nil {
		return fail(fmt.Errorf("loading table %q into %s (is the %s target's module loaded? the kernel log says why): %w", t, name, t.Type, err))
	}
	// DM_DEV_SUSPEND without the suspend flag resumes: it swaps the loaded
	// table in and makes the device live.
	if _, _, err := call(fd, unix.DM_DEV_SUSPEND, name, "", 0, nil); err != nil {
		return fail(fmt.Errorf("activating %s: %w", name, err))
	}
	return dev, nil
}

// Remove deactivates and removes a device-mapper device by name, retrying
// briefly while something still holds it open.
func Remove(ctx context.Context, control, name string) error {
	f, err := os.OpenFile(control, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("opening device-mapper control %s: %w", control, err)
	}
	defer f.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, err := call(int(f.Fd()), unix.DM_DEV_REMOVE, name, "", 0, nil)
		if err == nil || errors.Is(err, unix.ENXIO) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("removing device-mapper device %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func status(fd int, name string) (Device, error) {
	h, _, err := call(fd, unix.DM_DEV_STATUS, name, "", 0, nil)
	if err != nil {
		return Device{}, err
	}
	return Device{Name: name, Major: unix.Major(h.Dev), Minor: unix.Minor(h.Dev)}, nil
}

// encode lays out one dm ioctl buffer: struct dm_ioctl, then for each
// target a struct dm_target_spec followed by its NUL-terminated params,
// padded to 8 bytes (spec.next is the offset from this spec to the next).
func encode(name, uuid string, flags uint32, targets []Target) ([]byte, error) {
	if len(name) >= unix.DM_NAME_LEN || len(uuid) >= unix.DM_UUID_LEN {
		return nil, fmt.Errorf("device-mapper name %q or uuid %q too long", name, uuid)
	}
	var body bytes.Buffer
	for _, t := range targets {
		if len(t.Type) >= unix.DM_MAX_TYPE_NAME {
			return nil, fmt.Errorf("target type %q too long", t.Type)
		}
		params := append([]byte(t.Params), 0)
		for (dmSpecSize+len(params))%8 != 0 {
			params = append(params, 0)
		}
		spec := unix.DmTargetSpec{Sector_start: t.Start, Length: t.Length, Next: uint32(dmSpecSize + len(params))}
		copy(spec.Target_type[:], t.Type)
		if err := binary.Write(&body, binary.NativeEndian, &spec); err != nil {
			return nil, err
		}
		body.Write(params)
	}
	// Room for the kernel's reply (status, names) beyond what we send.
	size := dmIoctlSize + body.Len() + 16<<10
	h := unix.DmIoctl{
		Version:      dmVersion,
		Data_size:    uint32(size),
		Data_start:   uint32(dmIoctlSize),
		Target_count: uint32(len(targets)),
		Flags:        flags,
	}
	copy(h.Name[:], name)
	copy(h.Uuid[:], uuid)
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.NativeEndian, &h); err != nil {
		return nil, err
	}
	buf.Write(body.Bytes())
	out := make([]byte, size)
	copy(out, buf.Bytes())
	return out, nil
}

func call(fd int, req uint, name, uuid string, flags uint32, targets []Target) (unix.DmIoctl, []byte, error) {
	buf, err := encode(name, uuid, flags, targets)
	if err != nil {
		return unix.DmIoctl{}, nil, err
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&buf[0]))); errno != 0 {
		return unix.DmIoctl{}, nil, errno
	}
	var h unix.DmIoctl
	if err := binary.Read(bytes.NewReader(buf), binary.NativeEndian, &h); err != nil {
		return unix.DmIoctl{}, nil, err
	}
	return h, buf, nil
}

// Disassemble removes an array Assemble made, then its RAID10 metadata and
// data devices, so dm-raid writes a clean superblock and the next boot
// resyncs nothing. Devices already gone are not an error.
func Disassemble(ctx context.Context, control string, s Spec) error {
	errs := []error{Remove(ctx, control, s.Name)}
	if s.Level == RAID10 {
		for i := range s.Members {
			for _, suffix := range []string{"m", "d"} {
				errs = append(errs, Remove(ctx, control, fmt.Sprintf("%s-%s%d", s.Name, suffix, i)))
			}
		}
	}
	return errors.Join(errs...)
}
