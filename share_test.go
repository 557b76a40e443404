//go:build linux

package ringpoll

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// TestSharedEchoOutlivesRelease: on the io_uring engines with incrementally
// consumed buffers, an echo handler's reply goes out of the buffer its
// request arrived in (LoopStats.BuffersShared), after the handler released
// it. A victim that does not read its replies keeps them queued while four
// other clients cycle every buffer of a small ring many times; the
// victim's replies must still be its own bytes, the others must not starve
// (queued output keeps at most a quarter of the ring), and every buffer
// must come back once all have closed.
func TestSharedEchoOutlivesRelease(t *testing.T) {
	needUring(t)
	if !uringp.Incremental() {
		t.Skip("the kernel does not consume provided buffers incrementally (IOU_PBUF_RING_INC, Linux 6.12)")
	}
	// uring-hybrid is left out: its writers send straight from the
	// Writer's slices themselves, so its replies are queued, and shared,
	// only when the socket is full.
	for _, e := range []Engine{EngineUring, EngineUringSQPoll} {
		t.Run(e.String(), func(t *testing.T) { shareVictim(t, e) })
	}
}

func shareVictim(t *testing.T, e Engine) {
	ring := []Option{WithLoops(1), WithBufferRing(8, 16<<10)}
	ln := listen(t, e, "tcp", ring...)
	// The victim's server socket sends little at a time, so its replies
	// queue in ringpoll rather than in the kernel.
	tsServeHandler(t, ln, func(ctx context.Context, c *Conn) error {
		raw, _ := c.SyscallConn()
		raw.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096) })
		return tsEchoHandler(ctx, c)
	}, ring...)
	before := ufStats(ln)
	d := net.Dialer{Timeout: tsTimeout, Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	victim, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	// Ping-pong first, until a reply went out of a receive buffer: a
	// request in one piece of one buffer is shared, and with 8 KiB
	// requests in 16 KiB buffers at least every other one lies in one.
	victim.SetDeadline(time.Now().Add(2 * tsTimeout))
	for i := 0; ufStats(ln).BuffersShared == before.BuffersShared; i++ {
		if i == 100 {
			t.Fatalf("100 echoes of 8 KiB and no reply sent from a receive buffer (%v)", ufStats(ln))
		}
		msg := tsRandom(uint64(i), 8<<10)
		got := make([]byte, len(msg))
		if _, err := victim.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(victim, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("echo %d: %v, equal %v", i, err, bytes.Equal(got, msg))
		}
	}
	// Then requests the victim does not read the replies to, while the
	// others cycle the ring.
	sent := tsRandom(99, 2<<20)
	werr := make(chan error, 1)
	go func() {
		for off := 0; off < len(sent); off += 8 << 10 {
			if _, err := victim.Write(sent[off : off+8<<10]); err != nil {
				werr <- fmt.Errorf("victim write at %d: %w", off, err)
				return
			}
		}
		werr <- nil
	}()
	ltEchoOthers(t, ln.Addr().String())
	victim.SetReadDeadline(time.Now().Add(2 * tsTimeout))
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(victim, got); err != nil {
		t.Fatalf("victim read: %v (%v)", err, ufStats(ln))
	}
	if err := tsRecv(t, werr, "the victim's writes"); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, sent); !bytes.Equal(got, sent) {
		t.Fatalf("the victim's replies differ from its requests from byte %d: another connection's bytes?", i)
	}
	victim.Close()
	ufBuffersBack(t, ln)
	t.Logf("%v", ufStats(ln))
}
