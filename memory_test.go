//go:build linux

package ringpoll

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMemoryFlood: clients that write up to 1 GiB each to an echo server
// and never read, and clients that flood a slow handler, must not make the
// server's memory grow past its per-connection bound (docs/RELIABILITY.md,
// "The memory bound, stated"): the input mark (held input), once more the
// input mark (Reader.Next of input spread over several buffers returns a
// contiguous copy) and the output mark (held output: a reply queued by
// reference, as the echo's copy is, counts whole until its last byte is
// sent), 12 MiB with the defaults. The live heap
// (what a collection marks) is sampled throughout, with 4 flooding
// connections. Beyond the connections' bound it allows the buffer free
// lists a 4 MiB copy per P: a sync.Pool keeps a freed node in the
// private slot of the P that freed it, where the other Ps' Gets do not
// look, until the next collections (the peak grew by about that much a P
// at GOMAXPROCS 1, 2 and 4); and 16 MiB for everything else in the
// process (the clients' write buffers, the test's own allocations, one
// read past the input mark). The figures measured are in
// docs/RELIABILITY.md.
func TestMemoryFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for seconds")
	}
	const (
		clients = 4
		perConn = 2*defaultInputHighWater + defaultOutputHighWater
		conns   = clients * perConn
	)
	bound := conns + runtime.GOMAXPROCS(0)*4<<20 + 16<<20
	slow := func(ctx context.Context, c *Conn) error {
		// 4 KiB per call, 1 ms apart: about 4 MB/s.
		time.Sleep(time.Millisecond)
		r := c.Reader()
		_, err := r.Next(min(r.Len(), 4<<10))
		return err
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, tc := range []struct {
			name    string
			handler Handler
		}{{"never-reads", tsEchoHandler}, {"slow-handler", slow}} {
			t.Run(tc.name, func(t *testing.T) {
				_, ln, _ := tsStartServer(t, e, tc.handler, WithEngine(e))
				// Twice: buffers the subtest before gave back to the
				// sync.Pools live through one collection.
				runtime.GC()
				base := heapLive()
				var peak atomic.Uint64
				stop := make(chan struct{})
				sampled := make(chan struct{})
				go func() {
					defer close(sampled)
					for {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Millisecond):
						}
						if h := heapLive(); h > peak.Load() {
							peak.Store(h)
						}
					}
				}()
				// Each client writes for 3 s or until 1 GiB; a write that
				// stalls (the server's flow control) is retried until then.
				var sent atomic.Int64
				var wg sync.WaitGroup
				for range clients {
					c, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					wg.Add(1)
					go func() {
						defer wg.Done()
						chunk := make([]byte, 1<<20)
						end := time.Now().Add(3 * time.Second)
						for n := int64(0); n < 1<<30 && time.Now().Before(end); {
							c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
							k, err := c.Write(chunk)
							n += int64(k)
							sent.Add(int64(k))
							if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
								return
							}
						}
					}()
				}
				wg.Wait()
				close(stop)
				<-sampled
				grew := int64(peak.Load()) - int64(base)
				t.Logf("%d clients sent %d MiB; heap grew at most %.1f MiB, %.1f MiB per connection (connections' bound %d MiB, %d MiB in all)",
					clients, sent.Load()>>20, float64(grew)/(1<<20), float64(grew)/clients/(1<<20), perConn>>20, bound>>20)
				if grew > int64(bound) {
					t.Errorf("the heap grew %d bytes, over the bound of %d", grew, bound)
				}
				if sent.Load() >= clients<<30 && tc.name == "never-reads" {
					t.Errorf("the server took 1 GiB per client from clients that read nothing: flow control failed")
				}
			})
		}
	})
}

// heapLive returns the bytes of heap objects the collector marked live in
// a collection it runs now. HeapInuse, read after a collection, counts
// more than that: the free room in spans in use, and whatever the
// server's goroutines allocated (garbage included) between the collection
// and the read, which grows with how slowly the test's goroutine runs.
func heapLive() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
