package ringpoll

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestIdleConnKeepsNoBuffers: once a handler's reply is flushed and sent,
// the connection keeps no buffer: not the Writer's (given back to a pool
// on Flush, taken again by the next write), not the FD's write scratch
// where the loop sends the output, and neither the input nor the output
// queue (given back once empty, taken again when bytes come). The handler
// looks at its own state after Flush, on its own goroutine; the queues are
// looked at under their locks until the loop has finished the send.
func TestIdleConnKeepsNoBuffers(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		type seen struct {
			c                  *Conn
			writerBuf, scratch bool
		}
		states := make(chan seen, 4)
		h := func(ctx context.Context, c *Conn) error {
			if err := tsEchoHandler(ctx, c); err != nil {
				return err
			}
			states <- seen{c, c.writer.buf != nil, !c.fd.DirectWrite && c.fd.HasWriteScratch()}
			return nil
		}
		_, ln, _ := tsStartServer(t, e, h)
		peer := tsDialStd(t, "tcp", ln.Addr().String())
		for i := range 3 {
			if err := tsEchoOnce(peer, fmt.Sprintf("request %d", i)); err != nil {
				t.Fatal(err)
			}
			var s seen
			select {
			case s = <-states:
			case <-time.After(tsTimeout):
				t.Fatal("the handler did not report")
			}
			if s.writerBuf || s.scratch {
				t.Errorf("after reply %d the connection kept: Writer buffer %v, write scratch %v", i, s.writerBuf, s.scratch)
			}
			tsEventually(t, fmt.Sprintf("the input and output queues given back after reply %d", i), func() bool {
				in, out := s.c.fd.Buffers()
				return !in && !out
			})
		}
	})
}
