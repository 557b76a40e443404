package ringpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Reads at a File's position from many goroutines at once: each byte of
// the file goes to exactly one of them, as with an os.File.

// posWord is the 8-byte word at offset off of posData's file: the offset
// itself, tagged so that a word read across two is not taken for one.
func posWord(off int) uint64 { return 0xA5A5<<48 | uint64(off) }

// posData returns size bytes (a multiple of 8) of words that each hold
// their own offset, so that a byte read twice or never shows.
func posData(size int) []byte {
	b := make([]byte, size)
	for off := 0; off < size; off += 8 {
		binary.LittleEndian.PutUint64(b[off:], posWord(off))
	}
	return b
}

// posLocate returns the offset at which chunk, read from posData's file
// want, lies in it. A chunk of 15 bytes or more holds a whole word, which
// names its offset; a shorter one only ends a file, and must be its end.
func posLocate(want, chunk []byte) (int, bool) {
	if len(chunk) < 15 {
		off := len(want) - len(chunk)
		return off, bytes.Equal(want[off:], chunk)
	}
	for k := range 8 {
		off := int(binary.LittleEndian.Uint64(chunk[k:])&(1<<48-1)) - k
		if off >= 0 && off+len(chunk) <= len(want) && bytes.Equal(want[off:off+len(chunk)], chunk) {
			return off, true
		}
	}
	return 0, false
}

// posSpan is a chunk one Read returned, located in the file.
type posSpan struct{ off, n int }

// posCheck fails t unless spans cover every byte of a file of size bytes
// exactly once.
func posCheck(t *testing.T, spans []posSpan, size int) {
	t.Helper()
	seen := make([]uint8, size)
	total := 0
	for _, s := range spans {
		total += s.n
		for i := s.off; i < s.off+s.n; i++ {
			seen[i]++
		}
	}
	for i, c := range seen {
		if c != 1 {
			j := i
			for j < size && seen[j] == c {
				j++
			}
			t.Fatalf("read %d bytes of a %d-byte file; bytes %d to %d were read %d times, want each once", total, size, i, j, c)
		}
	}
	if total != size {
		t.Fatalf("read %d bytes of a %d-byte file", total, size)
	}
}

// TestFileReadConcurrent: eight goroutines Read one File at its position
// until io.EOF, with buffers of different, mostly odd sizes; together
// they read every byte of the file exactly once. The file's pages are
// first written back and dropped from the page cache, so that the ring's
// reads wait for the disk, as reads of a file not yet cached do: from
// the cache, the loop's enter completes each read before it issues the
// next, and they never overlap. Whether reads overlap still depends on
// the scheduler and the file system (most runs on ext4, before Reads
// took turns); TestFileReadTakesTurns forces the overlap.
func TestFileReadConcurrent(t *testing.T) {
	const size = 4 << 20
	want := posData(size)
	sizes := []int{4096, 4093, 1001, 8195, 517, 65536 + 3, 16, 12345}
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(t.TempDir(), "words")
		if err := os.WriteFile(name, want, 0o600); err != nil {
			t.Fatal(err)
		}
		f := fileOpen(t, e, name, os.O_RDONLY)
		if err := unix.Fsync(f.fd); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(f.fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		spans := make([][]posSpan, len(sizes))
		errs := make(chan error, len(sizes))
		for g, n := range sizes {
			wg.Go(func() {
				buf := make([]byte, n)
				for {
					m, err := f.Read(buf)
					if m > 0 {
						off, ok := posLocate(want, buf[:m])
						if !ok {
							errs <- fmt.Errorf("Read(%d bytes) returned %d bytes found nowhere in the file", n, m)
							return
						}
						spans[g] = append(spans[g], posSpan{off, m})
					}
					if err == io.EOF {
						return
					}
					if err != nil {
						errs <- fmt.Errorf("Read(%d bytes): %w", n, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if t.Failed() {
			return
		}
		var all []posSpan
		for _, s := range spans {
			all = append(all, s...)
		}
		posCheck(t, all, size)
	})
}

// TestFileReadTakesTurns: while a Read at the position is in progress
// (of a FIFO, where it waits for bytes), a second Read of the same File
// waits for it and issues nothing, as an os.File's does; it issues its
// own once the first ended. A Read waiting for its turn returns
// os.ErrClosed when the File is closed. Hooks mark the moments, so the
// order is the same on every run: before Reads took turns, the second was
// issued at once.
func TestFileReadTakesTurns(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		f, name := fifo(t, e)
		w, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		defer func() {
			if t.Failed() {
				// The Reads still in progress (two at most, of 16
				// bytes) end with 16 bytes each, so that Close, which
				// on epoll waits for a read(2), can finish.
				w.Write(make([]byte, 2*16))
			}
		}()
		issued := make(chan struct{}, 8)
		waiting := make(chan struct{}, 8)
		defer poll.SetTestHook(func(p poll.HookPoint, _ *poll.FD) {
			switch p {
			case poll.HookFileReadIssue:
				issued <- struct{}{}
			case poll.HookFileReadWait:
				waiting <- struct{}{}
			}
		})()
		type result struct {
			s   string
			err error
		}
		read := func() <-chan result {
			c := make(chan result, 1)
			go func() {
				buf := make([]byte, 16)
				n, err := f.Read(buf)
				c <- result{string(buf[:n]), err}
			}()
			return c
		}

		first := read()
		tsRecv(t, issued, "the first Read to be issued")
		second := read()
		select {
		case <-waiting:
		case <-issued:
			t.Fatal("a second Read at the position was issued while the first was in progress")
		case <-time.After(tsTimeout):
			t.Fatal("timed out waiting for the second Read to wait or be issued")
		}

		w.Write([]byte("one"))
		if r := tsRecv(t, first, "the first Read"); r.s != "one" || r.err != nil {
			t.Fatalf("first Read = %q, %v; want \"one\"", r.s, r.err)
		}
		tsRecv(t, issued, "the second Read to be issued once the first ended")
		w.Write([]byte("two"))
		if r := tsRecv(t, second, "the second Read"); r.s != "two" || r.err != nil {
			t.Fatalf("second Read = %q, %v; want \"two\"", r.s, r.err)
		}

		// Close ends a Read waiting for its turn at once, even where the
		// one in progress cannot be cancelled (a read(2) on epoll).
		third := read()
		tsRecv(t, issued, "the third Read to be issued")
		fourth := read()
		tsRecv(t, waiting, "the fourth Read to wait")
		closed := make(chan error, 1)
		go func() { closed <- f.Close() }()
		if r := tsRecv(t, fourth, "the Read waiting at Close"); r.s != "" || !errors.Is(r.err, os.ErrClosed) {
			t.Fatalf("a Read waiting for its turn at Close = %q, %v; want nothing, os.ErrClosed", r.s, r.err)
		}
		if e == EngineEpoll {
			w.Write([]byte("end")) // Close waits for the read(2) in progress
		}
		if r := tsRecv(t, third, "the Read in progress at Close"); r.s != "end" && !errors.Is(r.err, os.ErrClosed) {
			t.Fatalf("the Read in progress at Close = %q, %v; want \"end\" or os.ErrClosed", r.s, r.err)
		}
		if err := tsRecv(t, closed, "Close"); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
}
