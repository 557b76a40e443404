//go:build linux

package uringp

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWakeAfterTeardown: a producer that cleared a locked loop's sleeping
// flag just before the loop stopped, and writes the wake-up eventfd only
// after the loop closed it, writes nothing: the descriptor's number may
// belong to another file by then (a connection's socket, whose peer would
// read eight stray bytes).
func TestWakeAfterTeardown(t *testing.T) {
	err := onLockedThread(func() error {
		// A loop without a recv byte limit is locked.
		l := newLoop(ModeUring, Tuning{NoRecvLimit: true}.withDefaults())
		if !l.locked {
			return fmt.Errorf("Tuning{NoRecvLimit: true} made an unlocked loop")
		}
		if err := l.setup(); err != nil {
			l.teardownRing()
			return err
		}
		// The pipe's descriptors are open before the eventfd's number is
		// free, so neither takes it.
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
			l.teardownRing()
			return err
		}
		defer unix.Close(p[0])
		defer unix.Close(p[1])
		old := l.ev.FD()
		l.teardownRing()
		// The eventfd's old number now names the pipe, as it would a file
		// opened after the loop closed the eventfd.
		if err := unix.Dup3(p[1], old, unix.O_CLOEXEC); err != nil {
			return err
		}
		defer unix.Close(old)
		l.sleeping.Store(asleepInKernel)
		l.wake()
		var b [16]byte
		if n, err := unix.Read(p[0], b[:]); err == nil {
			return fmt.Errorf("a wake-up after the loop stopped wrote %q to the file that took the eventfd's number", b[:n])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
