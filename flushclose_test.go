//go:build linux

package ringpoll

import (
	"bytes"
	"crypto/sha256"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// hookFD stops the goroutine that reaches point for fd, once armed, until
// the test lets it go: the returned channel receives when it stopped, and
// release lets it go on. Every other connection and point passes at once.
func hookFD(t *testing.T, point poll.HookPoint, fd *poll.FD) (stopped <-chan struct{}, release func()) {
	t.Helper()
	stop := make(chan struct{}, 1)
	gate := make(chan struct{})
	var once sync.Once
	restore := poll.SetTestHook(func(p poll.HookPoint, at *poll.FD) {
		if p != point || at != fd {
			return
		}
		once.Do(func() {
			stop <- struct{}{}
			<-gate
		})
	})
	var released sync.Once
	release = func() { released.Do(func() { close(gate) }) }
	t.Cleanup(func() {
		release()
		restore()
	})
	return stop, release
}

// TestFlushCloseRace forces the interleaving of a writer and Close around
// the loop's drain: the loop has just sent the last queued byte and handed
// output back to writers (HookOutputDrained), and is held there; a writer
// then writes more, and the connection is closed at once. Whatever the
// engine does with the new bytes (sends them itself, or queues them for
// the loop that is held), the peer must read every byte written, then a
// clean EOF, and no drain may expire.
func TestFlushCloseRace(t *testing.T) {
	const first, second = 4 << 20, 64 << 10
	data := tsRandom(45, first+second)
	sum := sha256.Sum256(data)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, side := range tsSides {
			t.Run(string(side), func(t *testing.T) {
				c, peer := tsPair(t, e, "tcp", side, WithOutputHighWater(32<<20), WithDrainTimeout(2*tsTimeout))
				expired0 := fcExpired(c)
				stopped, release := hookFD(t, poll.HookOutputDrained, c.fd)
				// The peer reads nothing until the first part is queued,
				// so that the loop, not the writer, sends its end.
				c.SetWriteDeadline(time.Now().Add(tsTimeout))
				if _, err := c.Write(data[:first]); err != nil {
					t.Fatalf("Write: %v", err)
				}
				if c.fd.OutputQueued() == 0 {
					t.Fatalf("the kernel took all %d bytes: the loop has nothing to drain", first)
				}
				got := make(chan []byte, 1)
				go func() {
					peer.SetReadDeadline(time.Now().Add(tsTimeout))
					b, _ := io.ReadAll(peer)
					got <- b
				}()
				tsRecv(t, stopped, "the loop to drain the queue")
				// The loop is held after the drain: write, then close.
				if _, err := c.Write(data[first:]); err != nil {
					t.Fatalf("Write after the drain: %v", err)
				}
				if err := c.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				release()
				b := tsRecv(t, got, "the peer to read to the end")
				if h := sha256.Sum256(b); !bytes.Equal(h[:], sum[:]) {
					t.Errorf("the peer read %d of %d bytes, or other bytes, before EOF", len(b), len(data))
				}
				tsEventually(t, "the connection to be finalized", c.fd.Finalized)
				if n := fcExpired(c) - expired0; n != 0 {
					t.Errorf("%d drains expired", n)
				}
			})
		}
	})
}

// fcExpired sums the drains that expired on the loops of c's engine.
func fcExpired(c *Conn) (n uint64) {
	for _, s := range loopStatsOf(c) {
		n += s.DrainsExpired
	}
	return n
}
