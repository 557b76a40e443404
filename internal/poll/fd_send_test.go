//go:build linux

package poll

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeMover plays a zero-copy source: each Move takes the next of moves
// (a count, or an error), and Read reads from data after what was moved.
type fakeMover struct {
	moves []any // int or error
	data  []byte
	calls int
	// before, if set, runs at the start of each Move with its number,
	// from 1.
	before func(call int)
}

func (m *fakeMover) Move(_, n int) (int, error) {
	if m.before != nil {
		m.before(m.calls + 1)
	}
	if m.calls == len(m.moves) {
		return 0, nil // the source's end
	}
	mv := m.moves[m.calls]
	m.calls++
	if err, ok := mv.(error); ok {
		return 0, err
	}
	k := min(mv.(int), n, len(m.data))
	m.data = m.data[k:]
	return k, nil
}

func (m *fakeMover) Read(p []byte) (int, error) {
	if len(m.data) == 0 {
		return 0, io.EOF
	}
	k := copy(p, m.data)
	m.data = m.data[k:]
	return k, nil
}

type sendResult struct {
	n       int64
	handled bool
	err     error
}

func sendAsync(fd *FD, m Mover, n int64) <-chan sendResult {
	res := make(chan sendResult, 1)
	go func() {
		n, h, err := fd.SendFrom(m, n, MoveSendfile)
		res <- sendResult{n, h, err}
	}()
	return res
}

// TestSendFromStall: a Move that finds the socket full makes SendFrom ask
// its loop, once, to watch for writable edges, and wait for the next one
// before it moves again; but an edge the loop heard after that Move began
// and before the send said it waits (which nobody tells it again) makes
// it move again at once. Nothing is copied.
func TestSendFromStall(t *testing.T) {
	for _, edgeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("edge-before-ask=%v", edgeFirst), func(t *testing.T) {
			fd, _, _ := lifeFD(t)
			loop := fd.Loop.(*lifeLoop)
			st := loop.Stats()
			stalled, noted := make(chan struct{}, 1), make(chan struct{})
			defer SetTestHook(func(p HookPoint, at *FD) {
				if p != HookSendWantsWritable || at != fd {
					return
				}
				if edgeFirst {
					close(noted)
					fd.NoteWritable() // the loop heard an edge before the ask
				}
				stalled <- struct{}{}
			})()
			m := &fakeMover{moves: []any{10, errAgain, 20}, data: bytes.Repeat([]byte("x"), 10000)}
			m.before = func(call int) {
				if call != 3 {
					return
				}
				select {
				case <-noted:
				default:
					t.Errorf("Move %d before the loop heard the socket writable", call)
				}
			}
			res := sendAsync(fd, m, 10000)
			<-stalled
			if !edgeFirst {
				close(noted)
				fd.NoteWritable() // play the loop: the next edge
			}
			var r sendResult
			select {
			case r = <-res:
			case <-time.After(10 * time.Second):
				t.Fatal("SendFrom still waits: it missed the edge")
			}
			// 10 moved, an EAGAIN, 20 moved, then the source's end.
			if r.err != nil || !r.handled || r.n != 30 {
				t.Fatalf("SendFrom returned (%d, %v, %v), want (30, true, nil)", r.n, r.handled, r.err)
			}
			got := [...]uint64{st.Sendfiles.Load(), st.SendfileBytes.Load(), st.SendStalls.Load(), st.SendCopied.Load(), uint64(loop.watches.Load())}
			if want := [...]uint64{4, 30, 1, 0, 1}; got != want {
				t.Errorf("counted sendfiles, their bytes, stalls, copied bytes, watch requests %v; want %v", got, want)
			}
		})
	}
}

// TestSendFromUnsupported: a source the first Move cannot take is left to
// the caller, untouched; once bytes moved, the same errno is an error.
func TestSendFromUnsupported(t *testing.T) {
	fd, _, _ := lifeFD(t)
	n, handled, err := fd.SendFrom(&fakeMover{moves: []any{unix.EINVAL}, data: []byte("abc")}, 3, MoveSendfile)
	if n != 0 || handled || !errors.Is(err, unix.EINVAL) {
		t.Errorf("first Move EINVAL: SendFrom returned (%d, %v, %v), want (0, false, EINVAL)", n, handled, err)
	}
	n, handled, err = fd.SendFrom(&fakeMover{moves: []any{1, unix.EINVAL}, data: []byte("abc")}, 3, MoveSplice)
	var se *os.SyscallError
	if n != 1 || !handled || !errors.As(err, &se) || se.Syscall != "splice" {
		t.Errorf("EINVAL after a byte: SendFrom returned (%d, %v, %v), want (1, true, splice: EINVAL)", n, handled, err)
	}
}

// TestSendFromDeadline: SendFrom waiting for the loop to drain its queue
// returns ErrDeadline when the write deadline passes, and ErrClosed on
// Close.
func TestSendFromDeadline(t *testing.T) {
	for _, stop := range []string{"deadline", "close"} {
		t.Run(stop, func(t *testing.T) {
			fd, _, _ := lifeFD(t)
			if err := fd.queuePiece([]byte("queued before")); err != nil {
				t.Fatal(err)
			}
			m := &fakeMover{moves: []any{5}, data: []byte("hello")}
			res := sendAsync(fd, m, 5)
			// It waits for the queue (there is no other way out): stop it.
			want := ErrDeadline
			if stop == "close" {
				fd.Close()
				want = ErrClosed
			} else {
				fd.SetWriteDeadline(time.Now())
			}
			r := <-res
			if r.err != want || r.n != 0 || m.calls != 0 {
				t.Errorf("SendFrom returned (%d, %v) after %d moves, want (0, %v) before any", r.n, r.err, m.calls, want)
			}
		})
	}
}

// TestSendFromNoBlock: on a NoBlock FD, output the loop owns sends the
// whole source through the queue, at once.
func TestSendFromNoBlock(t *testing.T) {
	fd, _, _ := lifeFD(t)
	fd.NoBlock = true
	if err := fd.queuePiece([]byte("q")); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("y"), 100000)
	n, handled, err := fd.SendFrom(&fakeMover{moves: []any{1000}, data: data}, int64(len(data)), MoveSendfile)
	if n != int64(len(data)) || !handled || err != nil {
		t.Fatalf("SendFrom returned (%d, %v, %v)", n, handled, err)
	}
	if q := fd.OutputQueued(); q != 1+len(data) {
		t.Errorf("queued %d bytes, want %d", q, 1+len(data))
	}
}
