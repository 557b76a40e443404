//go:build linux

package uringp

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// TestAcceptStaleCQE: an accept CQE that carries the generation of a slot's
// former acceptor is dropped, and the socket it carries closed: it must
// not reach the acceptor that holds the slot now, nor leak.
func TestAcceptStaleCQE(t *testing.T) {
	l := newLoop(ModeUring, Tuning{})
	old := newAcceptor(l, -1)
	l.listen0(old)
	l.endAcceptor0(old)
	cur := newAcceptor(l, -1)
	l.listen0(cur)
	if cur.slot != old.slot || cur.gen == old.gen {
		t.Fatalf("slot %d gen %d reused as slot %d gen %d: want the same slot, a new generation", old.slot, old.gen, cur.slot, cur.gen)
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[1])
	cqe := uring.CQE{UserData: userData(kindAccept, old.gen, old.slot), Res: int32(sp[0])}
	l.dispatch(&cqe)
	if len(cur.fds) != 0 {
		t.Fatalf("a stale accept CQE reached the slot's new acceptor: %v", cur.fds)
	}
	if _, err := unix.FcntlInt(uintptr(sp[0]), unix.F_GETFD, 0); err == nil {
		unix.Close(sp[0])
		t.Fatal("the socket a stale accept CQE carried was left open")
	}
	// A CQE for a slot that was never used is stale too.
	l.dispatch(&uring.CQE{UserData: userData(kindAccept, 0, 7), Res: -int32(unix.ECANCELED)})
}

// listen0 and endAcceptor0 are listen and endAcceptor without the ring:
// the acceptor takes a slot but arms nothing.
func (l *loop) listen0(a *acceptor) {
	a.ending = true // armAccept does nothing
	l.listen(a)
	a.ending = false
}

func (l *loop) endAcceptor0(a *acceptor) {
	a.sysfd, _ = unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	l.endAcceptor(a)
}
