package kvproto

import (
	"os"

	"golang.org/x/sys/unix"
)

// fallocate reserves size bytes for f on disk.
func fallocate(f *os.File, size int64) error {
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return os.NewSyscallError("fallocate", err)
	}
	return nil
}
