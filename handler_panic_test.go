//go:build linux

package ringpoll

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// tsLines is a handler that serves each whole line of its input with
// serve and leaves a partial line for the next call, without ever waiting
// for input: it runs pooled and inline alike.
func tsLines(serve func(c *Conn, line []byte) error) Handler {
	return func(ctx context.Context, c *Conn) error {
		r := c.Reader()
		for n := r.Len(); n > 0; n = r.Len() {
			b, err := r.Peek(n)
			if err != nil {
				return err
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				return nil // the rest of the line is still to come
			}
			line, err := r.Next(i + 1)
			if err != nil {
				return err
			}
			if err := serve(c, line); err != nil {
				return err
			}
		}
		return nil
	}
}

// tsEchoLine writes line back.
func tsEchoLine(c *Conn, line []byte) error {
	w := c.Writer()
	if _, err := w.WriteBinary(line); err != nil {
		return err
	}
	return w.Flush()
}

// tsLog is a buffer a slog handler writes into from any goroutine.
type tsLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *tsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *tsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHandlerPanic: a handler that panics on one connection's request
// costs that connection, not the process, nor the loop an inline handler
// runs on. The peer sees its connection end; the Server's logger gets an
// Error record with the panic's value and the handler's stack; the
// Server's HandlerPanics is 1; and another connection of the same Server,
// on the same loop, is served before and after.
func TestHandlerPanic(t *testing.T) {
	const value = "tsPanicValue"
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range []tsStyle{tsHandler, tsInline} {
			t.Run(string(style), func(t *testing.T) {
				var logs tsLog
				opts := []Option{WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))}
				if style == tsInline {
					opts = append(opts, WithInlineHandler())
				}
				ln := listen(t, e, "tcp", WithLoops(1))
				s := tsServeHandler(t, ln, tsLines(func(c *Conn, line []byte) error {
					if string(line) == "panic\n" {
						panic(value)
					}
					return tsEchoLine(c, line)
				}), opts...)
				other := tsDialStd(t, "tcp", ln.Addr().String())
				if err := tsEchoOnce(other, "before\n"); err != nil {
					t.Fatalf("the other connection, before the panic: %v", err)
				}
				victim := tsDialStd(t, "tcp", ln.Addr().String())
				if _, err := victim.Write([]byte("panic\n")); err != nil {
					t.Fatal(err)
				}
				if got := tsReadEOF(t, victim, true); len(got) != 0 {
					t.Errorf("the panicking connection read %q, want its end", got)
				}
				if err := tsEchoOnce(other, "after\n"); err != nil {
					t.Fatalf("the other connection, after the panic: %v", err)
				}
				if n := s.srv.Stats().HandlerPanics; n != 1 {
					t.Errorf("HandlerPanics = %d, want 1", n)
				}
				log := logs.String()
				for _, want := range []string{"level=ERROR", value, "goroutine ", "TestHandlerPanic"} {
					if !strings.Contains(log, want) {
						t.Errorf("the log has no %q (the panic's value and stack); it reads:\n%s", want, log)
					}
				}
			})
		}
	})
}
