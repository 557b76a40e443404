//go:build linux

package poll

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// lifeLoop is a Loop that records Close requests; the test plays the loop.
type lifeLoop struct {
	closes  atomic.Int32
	watches atomic.Int32
	stats   Stats
}

func (l *lifeLoop) Flush(*FD)     {}
func (l *lifeLoop) Resume(*FD)    {}
func (l *lifeLoop) Close(*FD)     { l.closes.Add(1) }
func (l *lifeLoop) Stats() *Stats { return &l.stats }

func (l *lifeLoop) WatchWritable(*FD) { l.watches.Add(1) }

// lifeFD returns a registered-looking FD over one end of a socketpair, and
// the other end.
func lifeFD(t *testing.T) (*FD, int, *atomic.Int32) {
	t.Helper()
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sp[1]) })
	fd := NewFD(sp[0], &Config{InputHighWater: 1 << 20, InputLowWater: 1 << 19, OutputHighWater: 1 << 20, OutputLowWater: 1 << 19})
	fd.Loop = &lifeLoop{}
	finalized := new(atomic.Int32)
	fd.Hooks = (*countFinalized)(finalized)
	return fd, sp[1], finalized
}

// countFinalized counts Finalized calls.
type countFinalized atomic.Int32

func (c *countFinalized) InputArrived()       {}
func (c *countFinalized) OutputDrained() bool { return false }
func (c *countFinalized) Finalized()          { (*atomic.Int32)(c).Add(1) }

func fdOpen(fd int) bool {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	return err == nil
}

// owner records what a LinkBuffer told it.
type owner struct{ released, retired atomic.Int32 }

func (o *owner) Release() { o.released.Add(1) }
func (o *owner) Retire()  { o.retired.Add(1) }

// TestLifetimeOrder: the descriptor closes when the loop lets go after
// Close, not before; a handler's reference (Ref) delays the destroy, not
// the descriptor's close; Close with nothing queued shuts the writing side
// at once; a second Close fails; references cannot be taken once closed.
func TestLifetimeOrder(t *testing.T) {
	fd, peer, finalized := lifeFD(t)
	sysfd := fd.Sysfd
	if !fd.Ref() {
		t.Fatal("Ref on an open FD failed")
	}
	if err := fd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fd.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v, want ErrClosed", err)
	}
	// Shut for the peer before Close returned: it reads EOF.
	if n, err := unix.Read(peer, make([]byte, 1)); n != 0 || err != nil {
		t.Errorf("the peer read (%d, %v) after Close, want EOF", n, err)
	}
	if fd.Ref() {
		t.Error("Ref succeeded after Close")
	}
	if err := fd.Control(func(int) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Control after Close: %v, want ErrClosed", err)
	}
	if !fdOpen(sysfd) || fd.DescriptorClosed() {
		t.Fatal("the descriptor closed while the loop still held it")
	}
	fd.Detach()
	if fdOpen(sysfd) || !fd.DescriptorClosed() {
		t.Fatal("the descriptor is open after the loop let go")
	}
	if fd.Finalized() || finalized.Load() != 0 {
		t.Fatal("destroyed while a handler held a reference")
	}
	fd.Unref()
	if !fd.Finalized() || finalized.Load() != 1 {
		t.Fatalf("not destroyed once every reference was gone (Finalized ran %d times)", finalized.Load())
	}
	select {
	case <-fd.Done():
	default:
		t.Error("Done is not closed after the destroy")
	}
}

// TestLifetimeInput: at the destroy, input nobody holds is released to
// its owner, and input a reader holds slices of (Next without Release) is
// retired, never released.
func TestLifetimeInput(t *testing.T) {
	for _, held := range []bool{false, true} {
		fd, _, _ := lifeFD(t)
		var a, b owner
		fd.InputRef([]byte("abcd"), &a, 2)
		fd.InputRef([]byte("efgh"), &b, 2)
		if held {
			if p, err := fd.Next(2); err != nil || string(p) != "ab" {
				t.Fatalf("Next(2) = %q, %v", p, err)
			}
		}
		fd.Close()
		fd.Detach()
		want := [2]int32{1, 0} // released, retired
		if held {
			want = [2]int32{0, 1}
		}
		for i, o := range []*owner{&a, &b} {
			if got := [2]int32{o.released.Load(), o.retired.Load()}; got != want {
				t.Errorf("held=%v: owner %d got (released, retired) %v, want %v", held, i, got, want)
			}
		}
	}
	// Release before the destroy ends the hold.
	fd, _, _ := lifeFD(t)
	var a owner
	fd.InputRef([]byte("abcd"), &a, 2)
	fd.Next(4)
	fd.Release()
	fd.Close()
	fd.Detach()
	if a.released.Load() != 1 || a.retired.Load() != 0 {
		t.Errorf("released input: owner got %d releases and %d retirements, want 1 and 0", a.released.Load(), a.retired.Load())
	}
}

// TestLifetimeRace closes, detaches, and takes and drops references from
// many goroutines at once: the descriptor is closed once, after the last
// syscall holding it; the FD is destroyed once, after the last handler
// reference. Run it under -race.
func TestLifetimeRace(t *testing.T) {
	for range 200 {
		fd, _, finalized := lifeFD(t)
		sysfd := fd.Sysfd
		var wg sync.WaitGroup
		var bad atomic.Value
		for range 4 {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for range 20 {
					fd.Control(func(s int) error {
						if !fdOpen(s) {
							bad.Store("a descriptor closed under Control")
						}
						return nil
					})
				}
			}()
			go func() {
				defer wg.Done()
				for range 20 {
					if fd.Ref() {
						if fd.Finalized() {
							bad.Store("destroyed under a handler reference")
						}
						fd.Unref()
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			fd.Close()
			fd.Detach()
		}()
		wg.Wait()
		if s, _ := bad.Load().(string); s != "" {
			t.Fatal(s)
		}
		if fdOpen(sysfd) || !fd.Finalized() || finalized.Load() != 1 {
			t.Fatalf("after the race: descriptor open %v, finalized %v, Finalized ran %d times", fdOpen(sysfd), fd.Finalized(), finalized.Load())
		}
	}
}
