package ringpoll

import (
	"context"
	"fmt"
	"testing"
	"time"
	"unsafe"
)

// TestConnSize keeps the Conn, which every connection carries, in the
// 128-byte size class (docs/RELIABILITY.md, memory per idle connection).
// Put a new small field with the others in their shared word, or rarely
// used state behind a pointer.
func TestConnSize(t *testing.T) {
	if n := unsafe.Sizeof(Conn{}); n > 128 {
		t.Errorf("Conn is %d bytes, want at most 128", n)
	}
}

// TestIdleConnKeepsNoWriteState: once a handler's reply is flushed, the
// connection keeps neither the Writer's buffer (given back to a pool, taken
// again by the next write) nor, where the loop sends the output, the FD's
// write scratch: an idle connection carries neither. The handler looks at
// both itself, after Flush, on its own goroutine.
func TestIdleConnKeepsNoWriteState(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		type seen struct{ writerBuf, scratch bool }
		states := make(chan seen, 4)
		h := func(ctx context.Context, c *Conn) error {
			if err := tsEchoHandler(ctx, c); err != nil {
				return err
			}
			states <- seen{c.writer.buf != nil, !c.fd.DirectWrite && c.fd.HasWriteScratch()}
			return nil
		}
		_, ln, _ := tsStartServer(t, e, h)
		peer := tsDialStd(t, "tcp", ln.Addr().String())
		for i := range 3 {
			if err := tsEchoOnce(peer, fmt.Sprintf("request %d", i)); err != nil {
				t.Fatal(err)
			}
			select {
			case s := <-states:
				if s.writerBuf || s.scratch {
					t.Errorf("after reply %d the connection kept: Writer buffer %v, write scratch %v", i, s.writerBuf, s.scratch)
				}
			case <-time.After(tsTimeout):
				t.Fatal("the handler did not report")
			}
		}
	})
}
