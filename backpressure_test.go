//go:build linux

package ringpoll

// Backpressure tests: the input and output high-water marks bound what a
// connection buffers, whatever the peer does. Helpers (ts*) are in
// stress_test.go.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// tsSampler samples f every ~100µs on its own goroutine and keeps the
// maximum, until stop.
type tsSampler struct {
	max  atomic.Int64
	n    atomic.Int64
	quit chan struct{}
	done chan struct{}
}

func tsSample(f func() int) *tsSampler {
	s := &tsSampler{quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Microsecond)
		defer tick.Stop()
		for {
			v := int64(f())
			if v > s.max.Load() {
				s.max.Store(v)
			}
			s.n.Add(1)
			select {
			case <-s.quit:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends sampling and returns the maximum and the number of samples.
func (s *tsSampler) stop() (max, samples int64) {
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
	<-s.done
	return s.max.Load(), s.n.Load()
}

// TestBackpressureOutput: a server writes 64 MiB to a client that never
// reads, with WithOutputHighWater(64 KiB). The write must block, the output
// queue must never exceed 64 KiB (sampled throughout, and while blocked), and
// a write deadline must unblock it. In the net.Conn style the client then
// drains and must receive exactly the bytes Write reported.
func TestBackpressureOutput(t *testing.T) {
	const high = 64 << 10
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsBlockingStyles {
			t.Run(string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithOutputHighWater(high))
				type result struct {
					n   int
					err error
				}
				conns := make(chan *Conn, 1)
				results := make(chan result, 1)
				tsServe(t, ln, style, func(c *Conn) {
					conns <- c
					n, err := c.Write(tsBig)
					results <- result{n, err}
					if err == nil {
						return
					}
					// Send what was queued, then EOF, so the client can count.
					c.SetWriteDeadline(time.Now().Add(tsTimeout))
					if err := c.CloseWrite(); err != nil {
						t.Errorf("CloseWrite: %v", err)
					}
					io.Copy(io.Discard, c) // until the client closes
				}, func(ctx context.Context, c *Conn) error {
					c.Reader().Skip(c.Reader().Len())
					conns <- c
					w := c.Writer()
					w.WriteBinary(tsBig)
					err := w.Flush()
					results <- result{-1, err}
					return err
				})
				client := tsDialStd(t, "tcp", ln.Addr().String())
				client.Write([]byte("go"))
				c := tsRecv(t, conns, "the server connection")
				s := tsSample(c.fd.OutputQueued)
				tsWaitBlocked(t, tsFrameWrite, tsTestFrame(t))
				// Keep sampling while blocked.
				blockedAt := s.n.Load()
				tsEventually(t, "samples while blocked", func() bool { return s.n.Load() >= blockedAt+50 })
				// The queue holds the bytes the blocked writer is waiting
				// on. An io_uring send may empty it for a moment (the
				// kernel took them while the writer was parked), so wait
				// for a sample in range; the bound itself is checked on
				// every sample below.
				tsEventually(t, "the queue to hold the blocked writer's bytes", func() bool {
					q := c.fd.OutputQueued()
					return q > 0 && q <= high
				})
				select {
				case r := <-results:
					t.Fatalf("the write to a client that does not read returned (%d, %v)", r.n, r.err)
				default:
				}
				c.SetWriteDeadline(time.Now())
				r := tsRecv(t, results, "the write to time out")
				max, samples := s.stop()
				tsCheckDeadlineErr(t, "the blocked write", r.err)
				if max > high {
					t.Errorf("output queue reached %d bytes (%d samples), above the %d-byte high-water mark", max, samples, high)
				}
				t.Logf("max queued %d bytes over %d samples; Write returned n=%d", max, samples, r.n)
				if style == tsNetConn {
					if r.n <= 0 || r.n >= len(tsBig) {
						t.Fatalf("Write returned n=%d, want 0 < n < %d", r.n, len(tsBig))
					}
					client.SetReadDeadline(time.Now().Add(tsTimeout))
					got, err := io.Copy(io.Discard, client)
					if err != nil || got != int64(r.n) {
						t.Errorf("client read %d bytes (%v) after Write reported %d", got, err, r.n)
					}
				}
			})
		}
	})
}

// TestBackpressureInput: a client floods 64 MiB at a slow reader with
// WithInputHighWater(64 KiB). The server connection's held input, sampled
// throughout, must never exceed the mark plus one read (64 KiB); the reader
// repeatedly waits for the loop to pause at the mark before it reads on.
// Then all bytes must arrive in order (sha256).
func TestBackpressureInput(t *testing.T) {
	const (
		high  = 64 << 10
		bound = high + 64<<10
		total = 64 << 20
		pause = 8 << 20 // the reader stops to let input pile up every pause bytes
	)
	data := tsRandom(7, total)
	want := sha256.Sum256(data)
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsBlockingStyles {
			t.Run(string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithInputHighWater(high))
				conns := make(chan *Conn, 1)
				sums := make(chan []byte, 1)
				var pauses atomic.Int32
				// waitPaused waits until the loop stopped reading at the
				// mark (or everything left has arrived).
				waitPaused := func(c *Conn, count int) {
					tsEventually(t, "input to reach the high-water mark", func() bool {
						held := c.fd.InputHeld()
						return held >= high || count+held >= total
					})
					pauses.Add(1)
				}
				// Handler state: calls are serialized by the Server.
				var (
					h         hash.Hash = sha256.New()
					count     int
					nextPause int
					once      sync.Once
				)
				tsServe(t, ln, style, func(c *Conn) {
					conns <- c
					c.SetReadDeadline(time.Now().Add(2 * tsTimeout))
					h := sha256.New()
					b := make([]byte, 32<<10)
					read := func() bool {
						n, err := c.Read(b)
						h.Write(b[:n])
						count += n
						if err != nil {
							t.Errorf("Read after %d bytes: %v", count, err)
						}
						return err == nil
					}
				loop:
					for count < total {
						if count >= nextPause {
							// Drain what is buffered (the loop resumes under the
							// low-water mark), then stop reading until the loop
							// pauses at the high-water mark again.
							for c.Reader().Len() > 0 {
								if !read() {
									break loop
								}
							}
							if count == total {
								break // the drain kept pace with the sender to the end
							}
							waitPaused(c, count)
							nextPause += pause
						}
						if !read() {
							break
						}
					}
					sums <- h.Sum(nil)
				}, func(ctx context.Context, c *Conn) error {
					once.Do(func() { conns <- c })
					r := c.Reader()
					if count >= nextPause {
						// As above: drain, release, wait for the pause. Input
						// that arrives between Next and Release counts
						// against the mark with the consumed bytes, so the
						// loop may pause there and the Release leave it
						// paused at the low-water mark: drain until a
						// Release leaves nothing readable.
						for r.Len() > 0 {
							b, _ := r.Next(r.Len())
							h.Write(b)
							count += len(b)
							r.Release()
						}
						if count == total {
							sums <- h.Sum(nil)
							return nil
						}
						waitPaused(c, count)
						nextPause += pause
					}
					b, err := r.Next(min(r.Len(), 16<<10))
					if err != nil {
						return err
					}
					h.Write(b)
					if count += len(b); count == total {
						sums <- h.Sum(nil)
					}
					return nil
				})
				client := tsDialStd(t, "tcp", ln.Addr().String())
				client.SetDeadline(time.Now().Add(2 * tsTimeout))
				werr := tsWriteAsync(client, data)
				c := tsRecv(t, conns, "the server connection")
				s := tsSample(c.fd.InputHeld)
				got := tsRecv(t, sums, "the reader to get 64 MiB")
				max, samples := s.stop()
				if err := tsRecv(t, werr, "the client's write"); err != nil {
					t.Errorf("client write: %v", err)
				}
				if !bytes.Equal(got, want[:]) {
					t.Errorf("reader got sha256 %x, client sent %x", got, want)
				}
				if max > bound {
					t.Errorf("held input reached %d bytes (%d samples), above %d (high-water mark + one read)", max, samples, bound)
				}
				if pauses.Load() < 2 {
					t.Errorf("input paused at the mark %d times, want several", pauses.Load())
				}
				t.Logf("max held %d bytes over %d samples, %d pauses", max, samples, pauses.Load())
			})
		}
	})
}

// TestBackpressureUntil: Reader.Until on input without the delimiter fails
// with poll.ErrBufferFull once the input high-water mark is reached, instead
// of buffering forever or waiting for its deadline, in both styles.
func TestBackpressureUntil(t *testing.T) {
	const high = 64 << 10
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsStyles {
			t.Run(string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithInputHighWater(high))
				type result struct {
					b    []byte
					err  error
					held int
				}
				results := make(chan result, 1)
				until := func(c *Conn) error {
					c.SetReadDeadline(time.Now().Add(tsTimeout))
					b, err := c.Reader().Until('\n')
					if errors.Is(err, ErrWouldBlock) {
						return err // inline: called again with more input
					}
					results <- result{b, err, c.fd.InputHeld()}
					return err
				}
				tsServe(t, ln, style, func(c *Conn) { until(c) }, func(ctx context.Context, c *Conn) error { return until(c) })
				client := tsDialStd(t, "tcp", ln.Addr().String())
				client.SetDeadline(time.Now().Add(tsTimeout))
				go client.Write(bytes.Repeat([]byte{'a'}, 1<<20)) // fails once the server closes
				r := tsRecv(t, results, "Until to give up")
				if !errors.Is(r.err, poll.ErrBufferFull) {
					t.Errorf("Until without a delimiter returned (%d bytes, %v), want poll.ErrBufferFull", len(r.b), r.err)
				}
				var ne net.Error
				if errors.As(r.err, &ne) && ne.Timeout() {
					t.Errorf("Until waited for its deadline: %v", r.err)
				}
				if r.held > high+64<<10 {
					t.Errorf("%d bytes held when Until gave up, above the mark plus one read", r.held)
				}
			})
		}
	})
}

// TestBackpressureNextBeyondMark: Reader.Next and Peek of more bytes than
// the input high-water mark still complete: the loop reads past the mark
// for a reader that asked for it.
func TestBackpressureNextBeyondMark(t *testing.T) {
	const (
		high = 64 << 10
		n    = 256<<10 + 123
	)
	data := tsRandom(9, n)
	ops := []struct {
		name string
		op   func(r *Reader, n int) ([]byte, error)
	}{
		{"Next", (*Reader).Next},
		{"Peek", (*Reader).Peek},
		{"ReadBinary", (*Reader).ReadBinary},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsStyles {
			for _, o := range ops {
				t.Run(string(style)+"/"+o.name, func(t *testing.T) {
					ln := listen(t, e, "tcp", WithInputHighWater(high))
					type result struct {
						same bool
						err  error
					}
					results := make(chan result, 1)
					read := func(c *Conn) error {
						c.SetReadDeadline(time.Now().Add(tsTimeout))
						b, err := o.op(c.Reader(), n)
						if errors.Is(err, ErrWouldBlock) {
							return err // inline: called again with more input
						}
						results <- result{bytes.Equal(b, data), err}
						c.Reader().Skip(c.Reader().Len())
						c.Reader().Release()
						return err
					}
					tsServe(t, ln, style, func(c *Conn) { read(c) }, func(ctx context.Context, c *Conn) error { return read(c) })
					client := tsDialStd(t, "tcp", ln.Addr().String())
					client.SetDeadline(time.Now().Add(tsTimeout))
					go client.Write(data)
					r := tsRecv(t, results, o.name+" beyond the mark")
					if r.err != nil {
						t.Fatalf("%s(%d) with a %d-byte high-water mark: %v", o.name, n, high, r.err)
					}
					if !r.same {
						t.Errorf("%s(%d) returned other bytes than were sent", o.name, n)
					}
				})
			}
		}
	})
}

// TestBackpressureMessageAcrossReads: at the smallest input high-water
// mark, a handler answers 1000-byte length-prefixed messages and, finding
// only part of the next one, returns to wait for the rest, as netpoll-style
// handlers do (the net.Conn style reads the blocking way). The client sends
// four messages and part of a fifth, more than the mark, and sends the
// rest only once it has the first four replies. The loop must read that
// rest: bytes the handler consumed and released do not count against the
// mark, though the buffer that holds them stays for the fifth message's
// start; counted until the buffer is freed, they would hold input at the
// mark for good.
func TestBackpressureMessageAcrossReads(t *testing.T) {
	const (
		high = 4096
		size = 1000 // a whole message, with its 4-byte header
		msgs = 24
	)
	var data []byte
	for i := range msgs {
		data = binary.BigEndian.AppendUint32(data, size-4)
		data = append(data, tsRandom(uint64(i), size-4)...)
	}
	first := 4*size + 600
	// answer answers every whole message that has arrived, and reports
	// whether it answered any.
	answer := func(c *Conn) (bool, error) {
		r, w := c.Reader(), c.Writer()
		answered := false
		for r.Len() >= 4 {
			h, err := r.Peek(4)
			if err != nil {
				return answered, err
			}
			n := 4 + int(binary.BigEndian.Uint32(h))
			if r.Len() < n {
				break
			}
			m, err := r.Next(n)
			if err != nil {
				return answered, err
			}
			out, err := w.Malloc(n)
			if err != nil {
				return answered, err
			}
			copy(out, m)
			answered = true
		}
		if !answered {
			return false, nil
		}
		if err := w.Flush(); err != nil {
			return true, err
		}
		return true, r.Release()
	}
	handler := func(ctx context.Context, c *Conn) error {
		_, err := answer(c)
		return err // nil with part of a message: called again when more comes
	}
	netConn := func(c *Conn) {
		r, w := c.Reader(), c.Writer()
		for {
			h, err := r.Peek(4)
			if err != nil {
				return
			}
			m, err := r.Next(4 + int(binary.BigEndian.Uint32(h)))
			if err != nil {
				return
			}
			out, _ := w.Malloc(len(m))
			copy(out, m)
			if w.Flush() != nil || r.Release() != nil {
				return
			}
		}
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, style := range tsStyles {
			t.Run(string(style), func(t *testing.T) {
				ln := listen(t, e, "tcp", WithInputHighWater(high))
				tsServe(t, ln, style, netConn, handler)
				client := tsDialStd(t, "tcp", ln.Addr().String())
				client.SetDeadline(time.Now().Add(tsTimeout))
				if _, err := client.Write(data[:first]); err != nil {
					t.Fatal(err)
				}
				got := make([]byte, len(data))
				if _, err := io.ReadFull(client, got[:4*size]); err != nil {
					t.Fatalf("the first four replies: %v", err)
				}
				if _, err := client.Write(data[first:]); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(client, got[4*size:]); err != nil {
					t.Fatalf("the replies after the rest of the fifth message was sent: %v (the loop did not read it)", err)
				}
				if !bytes.Equal(got, data) {
					t.Errorf("the replies differ from the messages sent")
				}
			})
		}
	})
}
