//go:build linux

package poll

import (
	"bytes"
	"io"
	"testing"
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
