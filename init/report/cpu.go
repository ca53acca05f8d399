package report

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ReadCPU returns berth's processor time so far, its own and its reaped
// children's.
func ReadCPU() (CPU, error) {
	var self, children unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &self); err != nil {
		return CPU{}, fmt.Errorf("getrusage(RUSAGE_SELF): %w", err)
	}
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &children); err != nil {
		return CPU{}, fmt.Errorf("getrusage(RUSAGE_CHILDREN): %w", err)
	}
	return CPUFromRusage(&self, &children), nil
}

// CPUFromRusage converts getrusage's two answers to a CPU.
func CPUFromRusage(self, children *unix.Rusage) CPU {
	return CPU{
		UserMs:         tvMs(self.Utime),
		SysMs:          tvMs(self.Stime),
		ChildrenUserMs: tvMs(children.Utime),
		ChildrenSysMs:  tvMs(children.Stime),
	}
}

func tvMs(tv unix.Timeval) int64 {
	return int64(tv.Sec)*1000 + int64(tv.Usec)/1000
}
