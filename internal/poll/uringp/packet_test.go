//go:build linux

package uringp

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/uring"
)

// udpPair returns a bound UDP socket and a socket to send to it from.
func udpPair(t *testing.T) (recv, send int, to unix.Sockaddr) {
	t.Helper()
	recv, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(recv) })
	if err := unix.Bind(recv, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	to, err = unix.Getsockname(recv)
	if err != nil {
		t.Fatal(err)
	}
	send, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(send) })
	if err := unix.Bind(send, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	return recv, send, to
}

// onRing runs f on a goroutine locked to its thread with a PacketRing on
// fd, stopping the ring after.
func onRing(t *testing.T, fd, count, payload int, f func(p *PacketRing) error) {
	t.Helper()
	err := onLockedThread(func() error {
		p, err := NewPacketRing(fd, count, payload, false)
		if err != nil {
			return err
		}
		defer func() {
			p.Stop()
			if _, err := p.Recv(make([]Datagram, 1)); !errors.Is(err, ErrStopped) {
				panic(fmt.Sprintf("Recv after Stop: %v, want ErrStopped", err))
			}
		}()
		return f(p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recvAll reads until want datagrams arrived, giving each buffer back
// after copying the payload.
func recvAll(p *PacketRing, want int) ([][]byte, []Datagram, error) {
	var got [][]byte
	var ds []Datagram
	dst := make([]Datagram, 8)
	for len(got) < want {
		n, err := p.Recv(dst)
		if err != nil {
			return got, ds, err
		}
		for _, d := range dst[:n] {
			got = append(got, bytes.Clone(d.Data))
			ds = append(ds, d)
			p.Give(d.Bid)
		}
	}
	return got, ds, nil
}

// TestPacketRingReceives: datagrams arrive whole, in order, with their
// sender; an empty one too; a long one is cut and says so.
func TestPacketRingReceives(t *testing.T) {
	recv, send, to := udpPair(t)
	from, _ := unix.Getsockname(send)
	msgs := [][]byte{[]byte("one"), {}, bytes.Repeat([]byte("x"), 100), []byte("last")}
	for _, m := range msgs {
		if err := unix.Sendto(send, m, 0, to); err != nil {
			t.Fatal(err)
		}
	}
	onRing(t, recv, 8, 64, func(p *PacketRing) error {
		got, ds, err := recvAll(p, len(msgs))
		if err != nil {
			return err
		}
		for i, m := range msgs {
			d := ds[i]
			if want := from.(*unix.SockaddrInet4).Port; int(d.Addr.Port()) != want || d.Addr.Addr().As4() != [4]byte{127, 0, 0, 1} {
				return fmt.Errorf("datagram %d from %v, want 127.0.0.1:%d", i, d.Addr, want)
			}
			if d.Size != len(m) {
				return fmt.Errorf("datagram %d: Size %d, want %d", i, d.Size, len(m))
			}
			if len(m) > 64 {
				if !d.Truncated || !bytes.Equal(got[i], m[:64]) {
					return fmt.Errorf("datagram %d of %d bytes in 64-byte buffers: truncated %v, %d bytes", i, len(m), d.Truncated, len(got[i]))
				}
				continue
			}
			if d.Truncated || !bytes.Equal(got[i], m) {
				return fmt.Errorf("datagram %d: %q (truncated %v), want %q", i, got[i], d.Truncated, m)
			}
		}
		return nil
	})
}

// TestPacketRingRunsDry: with every buffer held by the reader, the RECVMSG
// ends for want of buffers; given back, they are read into again and no
// datagram is lost (the socket kept them).
func TestPacketRingRunsDry(t *testing.T) {
	recv, send, to := udpPair(t)
	const total = 20
	for i := range total {
		if err := unix.Sendto(send, []byte{byte(i)}, 0, to); err != nil {
			t.Fatal(err)
		}
	}
	onRing(t, recv, 4, 16, func(p *PacketRing) error {
		var held []Datagram
		dst := make([]Datagram, 2)
		next := 0
		for next < total {
			n, err := p.Recv(dst)
			if err != nil {
				return err
			}
			for _, d := range dst[:n] {
				if len(d.Data) != 1 || int(d.Data[0]) != next {
					return fmt.Errorf("got %v, want datagram %d", d.Data, next)
				}
				next++
				held = append(held, d)
			}
			if len(held) == 4 {
				// Every buffer is out: the kernel has none for the
				// datagrams left, until these go back.
				for _, d := range held {
					p.Give(d.Bid)
				}
				held = held[:0]
			}
		}
		for _, d := range held {
			p.Give(d.Bid)
		}
		if p.NoBuffers.Load() == 0 || p.Rearms.Load() == 0 {
			return fmt.Errorf("%d datagrams through 4 buffers: %d ends for want of buffers, %d re-arms; want both above 0", total, p.NoBuffers.Load(), p.Rearms.Load())
		}
		return nil
	})
}

// TestPacketRingStop: Stop ends a Recv that waits, from another
// goroutine, and the socket stays usable by its owner.
func TestPacketRingStop(t *testing.T) {
	recv, send, to := udpPair(t)
	waiting := make(chan *PacketRing)
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		p, err := NewPacketRing(recv, 4, 16, false)
		if err != nil {
			done <- err
			return
		}
		waiting <- p
		_, err = p.Recv(make([]Datagram, 4))
		done <- err
	}()
	select {
	case p := <-waiting:
		p.Stop()
	case err := <-done:
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrStopped) {
		t.Fatalf("Recv after Stop: %v, want ErrStopped", err)
	}
	if err := unix.Sendto(send, []byte("after"), 0, to); err != nil {
		t.Fatal(err)
	}
	var b [16]byte
	unix.SetNonblock(recv, false)
	n, _, err := unix.Recvfrom(recv, b[:], 0)
	if err != nil || string(b[:n]) != "after" {
		t.Fatalf("reading the socket after the ring stopped: %q, %v", b[:n], err)
	}
}

// TestPacketRingArenaOutlivesStop: a datagram handed out stays readable
// after the ring stops, and its memory is not pooled until given back.
func TestPacketRingArenaOutlivesStop(t *testing.T) {
	recv, send, to := udpPair(t)
	if err := unix.Sendto(send, []byte("kept"), 0, to); err != nil {
		t.Fatal(err)
	}
	var p *PacketRing
	var d Datagram
	err := onLockedThread(func() error {
		var err error
		if p, err = NewPacketRing(recv, 4, 16, false); err != nil {
			return err
		}
		ds := make([]Datagram, 1)
		if _, err := p.Recv(ds); err != nil {
			return err
		}
		d = ds[0]
		p.Stop()
		if _, err := p.Recv(ds); !errors.Is(err, ErrStopped) {
			return fmt.Errorf("Recv after Stop: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.freed.Load() {
		t.Fatal("the arena went back to the pool while a datagram was still held")
	}
	if string(d.Data) != "kept" {
		t.Fatalf("held datagram reads %q after Stop", d.Data)
	}
	p.Give(d.Bid)
	if !p.freed.Load() {
		t.Fatal("the arena did not go back to the pool when the last datagram was given back")
	}
}

// TestPacketRingSends: queued SENDMSGs go out with the next enter; when
// one fails, Recv returns with no datagram once all have completed, and
// WaitSends gives each result by its number.
func TestPacketRingSends(t *testing.T) {
	recv, send, _ := udpPair(t)
	payload := []byte("reply")
	good, bad := replyTo(send, payload), replyTo(send, payload)
	bad.msg.Namelen = 3 // too short for an address: EINVAL
	onRing(t, recv, 4, 16, func(p *PacketRing) error {
		p.QueueSend(&good.msg, 0)
		p.QueueSend(&bad.msg, 1)
		n, err := p.Recv(make([]Datagram, 4))
		if n != 0 || err != nil {
			return fmt.Errorf("Recv with a failed send and no datagram = %d, %v; want 0, nil", n, err)
		}
		res := p.WaitSends()
		if len(res) != 2 {
			return fmt.Errorf("WaitSends = %v, want two results", res)
		}
		for _, r := range res {
			switch {
			case r.I == 0 && r.Res != int32(len(payload)):
				return fmt.Errorf("send 0: %d, want %d bytes sent", r.Res, len(payload))
			case r.I == 1 && r.Res != -int32(unix.EINVAL):
				return fmt.Errorf("send 1: %d, want -EINVAL", r.Res)
			}
		}
		return nil
	})
	peerReads(t, send, "reply")
	runtime.KeepAlive(good)
	runtime.KeepAlive(bad)
}

// TestPacketRingSendsMoreThanItsQueue: sends queued beyond what the
// submission queue holds (64 entries) are submitted to make room, not
// lost: every one completes, and the peer reads each once.
func TestPacketRingSendsMoreThanItsQueue(t *testing.T) {
	recv, send, _ := udpPair(t)
	if err := unix.SetsockoptInt(send, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20); err != nil {
		t.Fatal(err)
	}
	const total = 150
	replies := make([]*reply, total)
	for i := range replies {
		replies[i] = replyTo(send, []byte(fmt.Sprintf("reply %03d", i)))
	}
	onRing(t, recv, 4, 16, func(p *PacketRing) error {
		for i, r := range replies {
			p.QueueSend(&r.msg, i)
		}
		res := p.WaitSends()
		if len(res) != total {
			return fmt.Errorf("WaitSends after %d sends: %d results", total, len(res))
		}
		seen := make([]bool, total)
		for _, r := range res {
			if r.I < 0 || r.I >= total || seen[r.I] || r.Res != int32(len("reply 000")) {
				return fmt.Errorf("result %+v: want each send once, %d bytes sent", r, len("reply 000"))
			}
			seen[r.I] = true
		}
		return nil
	})
	// Blocking reads (the send socket blocks), bounded.
	tv := unix.NsecToTimeval(int64(10 * time.Second))
	if err := unix.SetsockoptTimeval(send, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	var b [16]byte
	for range total {
		n, _, err := unix.Recvfrom(send, b[:], 0)
		if err != nil {
			t.Fatalf("the peer read %d replies, then: %v", len(got), err)
		}
		got[string(b[:n])] = true
	}
	if len(got) != total {
		t.Fatalf("the peer read %d distinct replies of %d", len(got), total)
	}
	runtime.KeepAlive(replies)
}

// reply is a SENDMSG's message and what it points to, which must stay
// put until the send completed.
type reply struct {
	to  unix.RawSockaddrInet4
	iov unix.Iovec
	msg unix.Msghdr
}

// replyTo returns a message sending payload to the address socket fd is
// bound to.
func replyTo(fd int, payload []byte) *reply {
	sa, _ := unix.Getsockname(fd)
	p4 := sa.(*unix.SockaddrInet4)
	r := &reply{iov: unix.Iovec{Base: &payload[0]}}
	r.to.Family = unix.AF_INET
	r.to.Addr = p4.Addr
	r.to.Port = uint16(p4.Port>>8 | p4.Port<<8) // network order
	r.iov.SetLen(len(payload))
	r.msg = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&r.to)), Namelen: unix.SizeofSockaddrInet4, Iov: &r.iov}
	r.msg.SetIovlen(1)
	return r
}

// TestPacketRingSendsBeforeNextBatch: replies queued after one batch
// leave when Recv hands out the next batch, not only with the wait after
// it; a reader that finds datagrams waiting would otherwise hold its
// replies back while it handles them. On both kinds of ring.
func TestPacketRingSendsBeforeNextBatch(t *testing.T) {
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			recv, send, to := udpPair(t)
			payload := []byte("reply")
			back := replyTo(send, payload)
			err := onLockedThread(func() error {
				p, err := newPacketRing(recv, 4, 16, false, parked)
				if err != nil {
					return err
				}
				defer func() {
					p.Stop()
					p.Recv(nil)
				}()
				dst := make([]Datagram, 4)
				if err := recvFirst(p, send, to, dst, "one"); err != nil {
					return err
				}
				p.QueueSend(&back.msg, 0)
				if err := unix.Sendto(send, []byte("two"), 0, to); err != nil {
					return err
				}
				// Let the second datagram's completion in without
				// submitting the queued send (no Flush: the kernel does
				// not see it yet).
				if err := waitCQ(p, 1); err != nil {
					return fmt.Errorf("the second datagram: %w", err)
				}
				if q := p.ring.SQReady(); q != 1 {
					return fmt.Errorf("before Recv: %d entries queued, want the send", q)
				}
				if n, err := p.Recv(dst); n != 1 || err != nil || string(dst[0].Data) != "two" {
					return fmt.Errorf("second Recv = %d, %v; want the datagram \"two\"", n, err)
				}
				p.Give(dst[0].Bid)
				if q := p.ring.SQReady(); q != 0 {
					return fmt.Errorf("Recv handed out the next batch with %d entries unsubmitted: the reply waits", q)
				}
				if res := p.WaitSends(); len(res) != 1 || res[0].Res != int32(len(payload)) {
					return fmt.Errorf("WaitSends = %v, want the reply sent", res)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			peerReads(t, send, "reply")
			runtime.KeepAlive(back)
		})
	}
}

// TestPacketRingSendsLeftByAFullRecv: a Recv whose dst filled before it
// handled every completion it reaped leaves the rest, a send's among
// them, for later; WaitSends must count that send rather than wait in
// the kernel for a completion already taken off the CQ (it did, for
// ever: a PacketServer with an inline handler hung once a batch filled).
func TestPacketRingSendsLeftByAFullRecv(t *testing.T) {
	recv, send, to := udpPair(t)
	payload := []byte("reply")
	back := replyTo(send, payload)
	onRing(t, recv, 4, 16, func(p *PacketRing) error {
		dst := make([]Datagram, 4)
		// Arm the RECVMSG with a first datagram.
		if err := recvFirst(p, send, to, dst, "zero"); err != nil {
			return err
		}
		// Two datagrams' completions, then the send's after them.
		for _, d := range []string{"one", "two"} {
			if err := unix.Sendto(send, []byte(d), 0, to); err != nil {
				return err
			}
		}
		if err := waitCQ(p, 2); err != nil {
			return err
		}
		p.QueueSend(&back.msg, 0)
		p.enter(0)
		if err := waitCQ(p, 3); err != nil {
			return err
		}
		if n, err := p.Recv(dst[:1]); n != 1 || err != nil || string(dst[0].Data) != "one" {
			return fmt.Errorf("Recv of one = %d, %v; want the datagram \"one\"", n, err)
		}
		p.Give(dst[0].Bid)
		if res := p.WaitSends(); len(res) != 1 || res[0].Res != int32(len(payload)) {
			return fmt.Errorf("WaitSends = %v, want the reply sent", res)
		}
		if n, err := p.Recv(dst); n != 1 || err != nil || string(dst[0].Data) != "two" {
			return fmt.Errorf("last Recv = %d, %v; want the datagram \"two\"", n, err)
		}
		p.Give(dst[0].Bid)
		return nil
	})
	peerReads(t, send, "reply")
	runtime.KeepAlive(back)
}

// peerReads checks that socket fd reads want next.
func peerReads(t *testing.T, fd int, want string) {
	t.Helper()
	var b [16]byte
	n, _, err := unix.Recvfrom(fd, b[:], 0)
	if err != nil || string(b[:n]) != want {
		t.Fatalf("the peer read %q, %v; want %q", b[:n], err, want)
	}
}

// recvFirst sends the datagram first from socket send to to, receives it
// into dst (arming the RECVMSG) and gives its buffer back.
func recvFirst(p *PacketRing, send int, to unix.Sockaddr, dst []Datagram, first string) error {
	if err := unix.Sendto(send, []byte(first), 0, to); err != nil {
		return err
	}
	if n, err := p.Recv(dst); n != 1 || err != nil {
		return fmt.Errorf("first Recv = %d, %v; want 1 datagram", n, err)
	}
	p.Give(dst[0].Bid)
	return nil
}

// waitCQ runs the ring's task work until n completions are ready.
func waitCQ(p *PacketRing, n uint32) error {
	for deadline := time.Now().Add(10 * time.Second); p.ring.CQReady() < n; {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d completions ready after 10s, want %d", p.ring.CQReady(), n)
		}
		p.ring.Enter(0, 0, uring.EnterGetEvents, nil, 0)
	}
	return nil
}

// TestPacketRingNoAllocs: receiving a batch and giving its buffers back
// allocates nothing.
func TestPacketRingNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	recv, send, to := udpPair(t)
	msg := []byte("0123456789abcdef0123456789abcdef")
	onRing(t, recv, 64, 64, func(p *PacketRing) error {
		dst := make([]Datagram, 16)
		bids := make([]uint16, 16)
		var failed error
		allocs := testing.AllocsPerRun(200, func() {
			for range 8 {
				if err := unix.Sendto(send, msg, 0, to); err != nil {
					failed = err
					return
				}
			}
			for got := 0; got < 8; {
				n, err := p.Recv(dst)
				if err != nil {
					failed = err
					return
				}
				for i, d := range dst[:n] {
					bids[i] = d.Bid
				}
				p.GiveAll(bids[:n])
				got += n
			}
		})
		if failed != nil {
			return failed
		}
		if allocs != 0 {
			return fmt.Errorf("%.1f allocations per batch of 8 datagrams, want 0", allocs)
		}
		return nil
	})
}

// TestParkedPacketRingFollowsThread: a parked ring's reader receives
// from any goroutine, and once its reader has settled on another thread
// than the one that armed the RECVMSG, the RECVMSG is cancelled and armed
// again from there, with no datagram lost on the way.
func TestParkedPacketRingFollowsThread(t *testing.T) {
	recv, send, to := udpPair(t)
	p, err := NewParkedPacketRing(recv, 8, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]Datagram, 8)
	sent, got := 0, 0
	// One datagram per Recv, sent only once the reader waits for it, so
	// that every Recv waits (and looks at its thread) at least once,
	// whatever the machine's pace.
	waiting := make(chan struct{}, 1)
	p.testWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	exchange := func() error {
		select {
		case <-waiting: // from a Recv before
		default:
		}
		errc := make(chan error, 1)
		go func() {
			<-waiting
			errc <- unix.Sendto(send, []byte("x"), 0, to)
		}()
		n, err := p.Recv(dst)
		if err != nil {
			return err
		}
		got += n
		for _, d := range dst[:n] {
			if string(d.Data) != "x" {
				return fmt.Errorf("datagram %d reads %q", got, d.Data)
			}
			p.Give(d.Bid)
		}
		sent++
		return <-errc
	}
	// Thread 1 arms the RECVMSG and stays locked (so thread 2 differs).
	hold := make(chan struct{})
	defer close(hold)
	armed := make(chan error)
	go func() {
		runtime.LockOSThread()
		armed <- exchange()
		<-hold
	}()
	if err := <-armed; err != nil {
		t.Fatal(err)
	}
	err = onLockedThread(func() error {
		// Four looks, one every threadEvery waits, settle the reader.
		for i := 0; p.Moves.Load() == 0 && i <= settleSamples*threadEvery; i++ {
			if err := exchange(); err != nil {
				return err
			}
		}
		if p.Moves.Load() != 1 {
			return fmt.Errorf("the reader settled on another thread, and its RECVMSG moved %d times, want 1", p.Moves.Load())
		}
		// Datagrams still come, now through a RECVMSG armed here.
		for range 2 * threadEvery {
			if err := exchange(); err != nil {
				return err
			}
		}
		for got < sent {
			n, err := p.Recv(dst)
			if err != nil {
				return err
			}
			got += n
			for _, d := range dst[:n] {
				p.Give(d.Bid)
			}
		}
		if p.Moves.Load() != 1 || p.armTid != unix.Gettid() {
			return fmt.Errorf("after the move: %d moves, armed on thread %d, reading on %d", p.Moves.Load(), p.armTid, unix.Gettid())
		}
		p.Stop()
		if _, err := p.Recv(dst); !errors.Is(err, ErrStopped) {
			return fmt.Errorf("Recv after Stop: %v, want ErrStopped", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != sent {
		t.Fatalf("received %d of %d datagrams", got, sent)
	}
}

// TestParkedPacketRingStopWithoutTheRing: Stop ends a parked reader's
// wait even if the ring brings no wake-up (the wake READ completes in the
// task work of the thread that armed it, which the ring's user does not
// control): with Stop's eventfd write made to wake nothing, Recv still
// returns ErrStopped.
func TestParkedPacketRingStopWithoutTheRing(t *testing.T) {
	recv, _, _ := udpPair(t)
	p, err := NewParkedPacketRing(recv, 8, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	p.testNoWake = true
	waiting := make(chan struct{})
	p.testWait = func() { close(waiting); p.testWait = nil }
	errc := make(chan error, 1)
	go func() {
		_, err := p.Recv(make([]Datagram, 1))
		errc <- err
	}()
	<-waiting // the reader is about to park, with nothing to read
	p.Stop()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrStopped) {
			t.Fatalf("Recv after Stop: %v, want ErrStopped", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Recv still waits a minute after Stop")
	}
}
