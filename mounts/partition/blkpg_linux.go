package partition

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AddPartition tells the kernel that partition pno of the disk open as f
// spans length bytes from start (BLKPG_ADD_PARTITION), for a table the
// kernel did not parse itself. The error is the bare errno: EBUSY says the
// partition exists already.
func AddPartition(f *os.File, pno int, start, length int64) error {
	return blkpg(f, unix.BLKPG_ADD_PARTITION, pno, start, length)
}

// ResizePartition tells the kernel that partition pno of the disk open as
// f now spans length bytes from start (BLKPG_RESIZE_PARTITION). Unlike a
// re-read (BLKRRPART) it works while another partition of the disk is in
// use. The error is the bare errno.
func ResizePartition(f *os.File, pno int, start, length int64) error {
	return blkpg(f, unix.BLKPG_RESIZE_PARTITION, pno, start, length)
}

func blkpg(f *os.File, op int32, pno int, start, length int64) error {
	p := unix.BlkpgPartition{Start: start, Length: length, Pno: int32(pno)}
	arg := unix.BlkpgIoctlArg{Op: op, Datalen: int32(unsafe.Sizeof(p)), Data: (*byte)(unsafe.Pointer(&p))}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return errno
	}
	return nil
}
