//go:build linux

package poll

import (
	"testing"
	"time"
)

// TestStopWaits: StopWaits wakes a reader that waits for input with
// ErrStopped, makes later reads that would wait fail at once, and leaves
// the input that arrived readable.
func TestStopWaits(t *testing.T) {
	fd, _, _ := lifeFD(t)
	p := fd.InputSpace(3)
	copy(p, "hal")
	fd.InputCommit(3, 3)
	fd.InputReady()
	res := make(chan error, 1)
	go func() {
		_, err := fd.Until('\n')
		res <- err
	}()
	for !fd.ReaderWaited() {
		time.Sleep(time.Millisecond) // a state to reach, not a pace to guess
	}
	fd.StopWaits()
	select {
	case err := <-res:
		if err != ErrStopped {
			t.Errorf("Until woken by StopWaits returned %v, want ErrStopped", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StopWaits did not wake the reader waiting in Until")
	}
	if b, err := fd.Next(3); err != nil || string(b) != "hal" {
		t.Errorf("Next(3) after StopWaits = %q, %v; want the input that arrived", b, err)
	}
	if _, err := fd.Next(1); err != ErrStopped {
		t.Errorf("Next(1) with no input after StopWaits returned %v, want ErrStopped at once", err)
	}
}
