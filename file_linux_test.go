package ringpoll

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileOpen opens name for engine e, closed at the end of the test.
func fileOpen(t *testing.T, e Engine, name string, flag int) *File {
	t.Helper()
	f, err := OpenFile(name, flag, 0o600, WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestFileReadWrite: what WriteAt wrote, ReadAt reads back, from many
// goroutines at once; a read past the end returns what there is and
// io.EOF; syncs succeed; a File made from an os.File sees the same bytes.
func TestFileReadWrite(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(t.TempDir(), "data")
		f := fileOpen(t, e, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
		want := make([]byte, 1<<20+123)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range want {
			want[i] = byte(rng.Uint32())
		}
		for _, cut := range [][2]int{{0, 1000}, {1000, 700000}, {700000, len(want)}} {
			if n, err := f.WriteAt(want[cut[0]:cut[1]], int64(cut[0])); n != cut[1]-cut[0] || err != nil {
				t.Fatalf("WriteAt(%d bytes at %d) = %d, %v", cut[1]-cut[0], cut[0], n, err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("Sync: %v", err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 7))
				buf := make([]byte, 4096)
				for range 200 {
					off := r.IntN(len(want) - len(buf))
					if n, err := f.ReadAt(buf, int64(off)); n != len(buf) || err != nil || !bytes.Equal(buf, want[off:off+len(buf)]) {
						errs <- errors.Join(errors.New("ReadAt returned other bytes"), err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		tail := make([]byte, 100)
		if n, err := f.ReadAt(tail, int64(len(want)-10)); n != 10 || err != io.EOF || !bytes.Equal(tail[:n], want[len(want)-10:]) {
			t.Fatalf("ReadAt past the end = %d, %v; want 10, io.EOF", n, err)
		}
		osf, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer osf.Close()
		g, err := NewFile(osf, WithEngine(e))
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if n, err := g.ReadAt(got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("NewFile: ReadAt = %d, %v, same bytes %v", n, err, bytes.Equal(got, want))
		}
		if err := g.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := osf.Stat(); err != nil {
			t.Fatalf("the os.File after its File closed: %v", err)
		}
	})
}

// TestFileNoSpace: a write that fills a small filesystem returns what it
// wrote, a part, and ENOSPC; that part reads back, and a write at its end
// writes nothing.
func TestFileNoSpace(t *testing.T) {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mounting a small tmpfs: %v (needs CAP_SYS_ADMIN)", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(dir, e.String())
		f := fileOpen(t, e, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
		defer os.Remove(name)
		p := make([]byte, 1<<20)
		for i := range p {
			p[i] = byte(i * 31)
		}
		n, err := f.WriteAt(p, 0)
		if !errors.Is(err, syscall.ENOSPC) || n >= len(p) || n == 0 {
			t.Fatalf("WriteAt of 1 MiB on a 64 KiB tmpfs = %d, %v; want some bytes, not all, and ENOSPC", n, err)
		}
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Path != name {
			t.Fatalf("error %v: want an *os.PathError naming %s", err, name)
		}
		got := make([]byte, n+1)
		if m, err := f.ReadAt(got, 0); m != n || err != io.EOF || !bytes.Equal(got[:m], p[:n]) {
			t.Fatalf("read back = %d, %v; want the %d bytes written and io.EOF", m, err, n)
		}
		if m, err := f.WriteAt(p[:4096], int64(n)); m != 0 || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("WriteAt on the full tmpfs = %d, %v; want 0, ENOSPC", m, err)
		}
	})
}

// fifo makes a named pipe and opens it for engine e: its reads wait for a
// writer's bytes, so they stay in flight as long as a test likes.
func fifo(t *testing.T, e Engine) (*File, string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(name, 0o600); err != nil {
		t.Fatal(err)
	}
	return fileOpen(t, e, name, os.O_RDWR), name
}

// fileSQEs counts the SQEs f's engine submitted.
func fileSQEs(f *File) uint64 {
	var n uint64
	for _, s := range f.ref.eng.Stats() {
		n += s.SQEs.Load()
	}
	return n
}

// waitSubmitted yields until f's engine has taken a request since it
// counted before, so that the read a test started is in the ring, not
// about to be.
func waitSubmitted(f *File, before uint64) {
	for fileSQEs(f) == before {
		runtime.Gosched()
	}
}

// TestFileCloseInFlight: Close ends a read that waits, with os.ErrClosed,
// and later calls fail the same way. On epoll, where the read is a system
// call, Close waits for it to end and closes the descriptor only then:
// the read gets the bytes that end it (or os.ErrClosed, if Close came
// before it started), never EBADF.
func TestFileCloseInFlight(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		f, name := fifo(t, e)
		w, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		type result struct {
			n   int
			err error
		}
		res := make(chan result, 1)
		before := fileSQEs(f)
		buf := make([]byte, 16)
		go func() {
			n, err := f.Read(buf)
			res <- result{n, err}
		}()
		if e == EngineEpoll {
			closed := make(chan error, 1)
			go func() { closed <- f.Close() }()
			tsEventually(t, "Close to begin", f.closed.Load)
			w.Write([]byte("last"))
			r := tsRecv(t, res, "the read in flight at Close")
			if !(r.err == nil && string(buf[:r.n]) == "last") && !errors.Is(r.err, os.ErrClosed) {
				t.Fatalf("read in flight at Close = %q, %v; want the bytes or os.ErrClosed", buf[:r.n], r.err)
			}
			if err := tsRecv(t, closed, "Close"); err != nil {
				t.Fatalf("Close: %v", err)
			}
		} else {
			waitSubmitted(f, before)
			if err := f.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if r := tsRecv(t, res, "the read Close ended"); !errors.Is(r.err, os.ErrClosed) {
				t.Fatalf("read in flight at Close: %v, want os.ErrClosed", r.err)
			}
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("ReadAt after Close: %v, want os.ErrClosed", err)
		}
		if err := f.Close(); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("second Close: %v, want os.ErrClosed", err)
		}
	})
}

// TestFileBadInput: negative offsets and missing files fail clearly.
func TestFileBadInput(t *testing.T) {
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing"), os.O_RDONLY, 0); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("OpenFile of a missing file: %v, want os.ErrNotExist", err)
	}
	f := fileOpen(t, EngineEpoll, filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE)
	if _, err := f.ReadAt(make([]byte, 1), -1); err == nil {
		t.Fatal("ReadAt at -1 succeeded")
	}
	if _, err := f.WriteAt(make([]byte, 1), -1); err == nil {
		t.Fatal("WriteAt at -1 succeeded")
	}
	if _, err := OpenFile("x", os.O_RDONLY, 0, WithEngine(Engine(200))); err == nil {
		t.Fatal("OpenFile with a bad engine option succeeded")
	}
}

// alignedBuf returns n bytes aligned for O_DIRECT (4096).
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 4096 - int(uintptr(unsafe.Pointer(&b[0]))&4095)
	return b[off%4096:][:n:n]
}

// TestFileDirect: O_DIRECT reads and writes of aligned blocks, which skip
// the page cache, through every engine.
func TestFileDirect(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(t.TempDir(), "direct")
		f, err := OpenFile(name, os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o600, WithEngine(e))
		if errors.Is(err, syscall.EINVAL) {
			t.Skipf("O_DIRECT here: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := alignedBuf(64 << 10)
		for i := range w {
			w[i] = byte(i * 7)
		}
		if n, err := f.WriteAt(w, 4096); n != len(w) || err != nil {
			t.Fatalf("O_DIRECT WriteAt = %d, %v", n, err)
		}
		r := alignedBuf(len(w))
		if n, err := f.ReadAt(r, 4096); n != len(r) || err != nil || !bytes.Equal(r, w) {
			t.Fatalf("O_DIRECT ReadAt = %d, %v, same bytes %v", n, err, bytes.Equal(r, w))
		}
	})
}

// TestFileNowaitProbe: a file the kernel can try without sleeping (a
// regular file here, a FIFO) is found so, and the probe takes nothing
// from it (a byte waiting in the FIFO is still there); a write-only
// file, which the probe cannot ask, counts as one that may sleep. (A FUSE
// file, which may sleep, is TestFileReadSleepingFS's.)
func TestFileNowaitProbe(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "data")
	if err := os.WriteFile(name, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		flag int
		want bool
	}{
		{name, unix.O_RDONLY, true},
		{name, unix.O_RDWR, true},
		{fifo, unix.O_RDWR | unix.O_NONBLOCK, true},
		{name, unix.O_WRONLY, false},
	} {
		fd, err := unix.Open(c.name, c.flag|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if c.name == fifo {
			if _, err := unix.Write(fd, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
		if got := nowaitCapable(fd); got != c.want {
			t.Errorf("nowaitCapable(%s, flags %#x) = %v, want %v", filepath.Base(c.name), c.flag, got, c.want)
		}
		if c.name == fifo {
			b := make([]byte, 2)
			if n, err := unix.Read(fd, b); n != 1 || err != nil {
				t.Errorf("the FIFO's byte after the probe: read %d, %v; want 1 byte", n, err)
			}
		}
	}
}
