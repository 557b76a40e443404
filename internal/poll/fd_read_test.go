//go:build linux

package poll

import (
	"bytes"
	"errors"
	"io"
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
		fd.InputCommit(len(s))
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
		fd.InputCommit(len(s))
		fd.InputReady()
	}
	step("nothing", 0)
	input("hello, world\n")
	step("input", 13)
	var o owner
	fd.InputRef([]byte("by ref\n"), &o)
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
