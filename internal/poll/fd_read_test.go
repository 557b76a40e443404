//go:build linux

package poll

import (
	"bytes"
	"errors"
	"io"
	"syscall"
	"testing"

	"github.com/ringpoll/ringpoll/internal/buf"
)

// TestWriteToLends: while WriteTo's writer holds a chunk, Release frees
// nothing (the chunk's memory stays the input's: a Release would have
// let new input overwrite it), and the chunk is released once the writer
// returned.
func TestWriteToLends(t *testing.T) {
	fd, _, _ := lifeFD(t)
	input := func(s string) {
		p := fd.InputSpace(len(s))
		copy(p, s)
		fd.InputCommit(len(s), len(s))
		fd.InputReady()
	}
	input("first")
	var got bytes.Buffer
	held := make(chan int, 1)
	w := writerFunc(func(p []byte) (int, error) {
		if got.Len() == 0 {
			fd.Release() // as a concurrent reader's release would
			held <- fd.InputHeld()
			input("second") // arrives while the chunk is held
			fd.InputError(io.EOF)
			fd.InputReady()
		}
		return got.Write(p)
	})
	type result struct {
		n   int64
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := fd.WriteTo(w)
		res <- result{n, err}
	}()
	if h := <-held; h != len("first") {
		t.Errorf("input held while the writer has its chunk: %d bytes after Release, want %d", h, len("first"))
	}
	r := <-res
	if r.err != nil || r.n != int64(len("firstsecond")) || got.String() != "firstsecond" {
		t.Errorf("WriteTo returned (%d, %v) and wrote %q", r.n, r.err, got.String())
	}
	if h := fd.InputHeld(); h != 0 {
		t.Errorf("input held after WriteTo: %d bytes", h)
	}
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestLenWithoutLock: Len, which reads a copy of the input's length kept
// beside it, says what the input under its lock says after every way the
// length changes: input from the loop, by copy or by reference, Next,
// Skip, Read, Until, Slice, WriteTo, and the FD's end.
func TestLenWithoutLock(t *testing.T) {
	fd, _, _ := lifeFD(t)
	locked := func() int {
		fd.inMu.Lock()
		defer fd.inMu.Unlock()
		return fd.in.Len()
	}
	step := func(what string, want int) {
		t.Helper()
		if n, l := fd.Len(), locked(); n != want || l != want {
			t.Fatalf("after %s: Len %d, the input's length %d; want %d", what, n, l, want)
		}
	}
	input := func(s string) {
		p := fd.InputSpace(len(s))
		copy(p, s)
		fd.InputCommit(len(s), len(s))
		fd.InputReady()
	}
	step("nothing", 0)
	input("hello, world\n")
	step("input", 13)
	var o owner
	fd.InputRef([]byte("by ref\n"), &o, 1)
	step("input by reference", 20)
	if _, err := fd.Peek(5); err != nil {
		t.Fatal(err)
	}
	step("Peek", 20)
	if _, err := fd.Next(5); err != nil {
		t.Fatal(err)
	}
	step("Next", 15)
	if err := fd.Skip(2); err != nil {
		t.Fatal(err)
	}
	step("Skip", 13)
	fd.Release()
	step("Release", 13)
	if n, err := fd.Read(make([]byte, 3)); n != 3 || err != nil {
		t.Fatalf("Read: %d, %v", n, err)
	}
	step("Read", 10)
	if _, err := fd.Until('\n'); err != nil {
		t.Fatal(err)
	}
	step("Until", 7)
	var dst buf.LinkBuffer
	if _, err := fd.Slice(3, &dst); err != nil {
		t.Fatal(err)
	}
	step("Slice", 4)
	dst.Release()
	// A writer that fails ends WriteTo with the turn's bytes consumed.
	failed := errors.New("stop")
	if n, err := fd.WriteTo(writerFunc(func(p []byte) (int, error) { return len(p), failed })); n != 4 || err != failed {
		t.Fatalf("WriteTo: %d, %v", n, err)
	}
	step("WriteTo", 0)
	input("left behind")
	step("input again", 11)
	fd.destroy()
	step("the end", 0)
}

// TestInputBurstSizesNodes: reads that fill their space grow the next
// node; a burst that ends short sizes the next node to twice the burst
// (so that a burst like it comes in one read), up to maxClassHint; a
// small burst goes back to ReadSize nodes.
func TestInputBurstSizesNodes(t *testing.T) {
	fd, _, _ := lifeFD(t)
	burst := 0
	// read "reads" n bytes into the input as ReadReady does and returns
	// the space it had.
	read := func(n int) int {
		t.Helper()
		p := fd.InputSpace(ReadSize)
		if len(p) < n {
			t.Fatalf("InputSpace gave %d bytes, want at least %d", len(p), n)
		}
		burst += n
		fd.InputCommit(n, burst)
		return len(p)
	}
	// drain consumes and releases the input, ending the burst: the next
	// read takes a new buffer, sized by the hint.
	drain := func() {
		t.Helper()
		if _, err := fd.Next(fd.Len()); err != nil {
			t.Fatal(err)
		}
		fd.Release()
		burst = 0
	}
	if got := read(ReadSize); got != ReadSize {
		t.Fatalf("first read: %d bytes of space, want %d", got, ReadSize)
	}
	if got := read(2 * ReadSize); got != 2*ReadSize {
		t.Fatalf("after a full read: %d bytes of space, want %d", got, 2*ReadSize)
	}
	if got := read(ReadSize); got != 4*ReadSize {
		t.Fatalf("after two full reads: %d bytes of space, want %d", got, 4*ReadSize)
	}
	drain() // a burst of 4 x ReadSize that ended short
	if got := read(4 * ReadSize); got != 8*ReadSize {
		t.Fatalf("after a burst of %d: %d bytes of space, want %d (one read for a burst like it)", 4*ReadSize, got, 8*ReadSize)
	}
	drain()
	if got := read(100); got != 8*ReadSize {
		t.Fatalf("the same burst again: %d bytes of space, want %d", got, 8*ReadSize)
	}
	drain() // a small burst
	if got := read(100); got != ReadSize {
		t.Fatalf("after a burst of 100 bytes: %d bytes of space, want %d", got, ReadSize)
	}
	drain()
	// A long burst that ended short asks for at most maxClassHint: full
	// reads of 4, 8 and 16 KiB, then 20,000 bytes into 32 KiB.
	for _, n := range []int{ReadSize, 2 * ReadSize, 4 * ReadSize, 20000} {
		read(n)
	}
	drain()
	if got := read(1); got != maxClassHint {
		t.Fatalf("after a burst of %d: %d bytes of space, want %d", maxClassHint, got, maxClassHint)
	}
}

// TestInputEndKept: input's end is sticky and first wins. An EOF is a
// flag alone (the FD makes no waitState for it); a read error is kept in
// the waitState. Either comes after the buffered bytes.
func TestInputEndKept(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first error
	}{
		{"EOF", io.EOF},
		{"reset", syscall.ECONNRESET},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, _, _ := lifeFD(t)
			p := fd.InputSpace(2)
			copy(p, "hi")
			fd.InputCommit(2, 2)
			fd.InputError(tc.first)
			fd.InputError(syscall.EPIPE) // later: ignored
			fd.InputReady()
			if !fd.InputEnded() {
				t.Fatal("InputEnded is false after InputError")
			}
			if made := fd.wait.Load() != nil; made != (tc.first != io.EOF) {
				t.Errorf("waitState made: %v, want %v", made, tc.first != io.EOF)
			}
			b := make([]byte, 8)
			if n, err := fd.Read(b); n != 2 || err != nil {
				t.Fatalf("first Read: (%d, %v), want the 2 buffered bytes", n, err)
			}
			for range 2 {
				if n, err := fd.Read(b); n != 0 || err != tc.first {
					t.Fatalf("Read after the bytes: (%d, %v), want (0, %v)", n, err, tc.first)
				}
			}
		})
	}
}
