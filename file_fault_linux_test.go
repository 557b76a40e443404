package ringpoll

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Faults a File meets, each on every engine: reads that end at or past
// the end of the file, writes that a limit cuts short, a full
// filesystem, failing reads (fault_fuse_linux_test.go), and the lifetime
// of a buffer whose read was cancelled.

// TestFileShortReads: a read that spans the end of the file returns the
// bytes there are and io.EOF, as os.File's ReadAt does; one at or past the
// end returns 0 and io.EOF; an empty one returns 0 and no error; Read at
// the end returns io.EOF. Through the page cache and with O_DIRECT.
func TestFileShortReads(t *testing.T) {
	const size = 3*4096 + 100
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*13 + i>>12)
	}
	cases := []struct {
		name    string
		off     int64
		n       int
		want    int
		wantEOF bool
	}{
		{"spanning", 2 * 4096, 8192, 4096 + 100, true},
		{"at-end", size, 4096, 0, true},
		{"past-end", 1 << 20, 4096, 0, true},
		{"empty", 1 << 20, 0, 0, false},
		{"inside", 0, 8192, 8192, false},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(t.TempDir(), "short")
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, direct := range []bool{false, true} {
			flag := os.O_RDONLY
			if direct {
				flag |= unix.O_DIRECT
			}
			f, err := OpenFile(name, flag, 0, WithEngine(e))
			if direct && errors.Is(err, syscall.EINVAL) {
				t.Logf("no O_DIRECT here: %v", err)
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, tc := range cases {
				buf := alignedBuf(tc.n)
				n, err := f.ReadAt(buf, tc.off)
				if n != tc.want || (err == io.EOF) != tc.wantEOF || err != nil && err != io.EOF {
					t.Errorf("direct=%v %s: ReadAt(%d bytes at %d) = %d, %v; want %d, EOF %v", direct, tc.name, tc.n, tc.off, n, err, tc.want, tc.wantEOF)
					continue
				}
				if !bytes.Equal(buf[:n], data[min(tc.off, size):][:n]) {
					t.Errorf("direct=%v %s: ReadAt returned other bytes", direct, tc.name)
				}
			}
		}
		// Read at the file's position: what is there, then io.EOF.
		f := fileOpen(t, e, name, os.O_RDONLY)
		got, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("ReadAll through Read = %d bytes, %v; want the file's %d", len(got), err, size)
		}
		if n, err := f.Read(make([]byte, 10)); n != 0 || err != io.EOF {
			t.Fatalf("Read at the end = %d, %v; want 0, io.EOF", n, err)
		}
	})
}

// TestFileShortWrite: a write that RLIMIT_FSIZE cuts returns the bytes
// written and EFBIG, as os.File's WriteAt does; the bytes before the
// limit are on file; a write at the limit writes nothing. (The runtime
// ignores the SIGXFSZ the kernel sends with it.)
func TestFileShortWrite(t *testing.T) {
	const limit = 64 << 10
	forEachEngine(t, func(t *testing.T, e Engine) {
		name := filepath.Join(t.TempDir(), "fsize")
		f := fileOpen(t, e, name, os.O_RDWR|os.O_CREATE|os.O_TRUNC)
		p := bytes.Repeat([]byte("0123456789"), 10000) // 100,000 bytes
		var old unix.Rlimit
		if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		lim := unix.Rlimit{Cur: limit, Max: old.Max}
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &lim); err != nil {
			t.Skipf("lowering RLIMIT_FSIZE: %v", err)
		}
		n, err := f.WriteAt(p, 0)
		n2, err2 := f.WriteAt(p[:10], limit)
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &old); err != nil {
			t.Fatal(err)
		}
		if n != limit || !errors.Is(err, syscall.EFBIG) {
			t.Fatalf("WriteAt of %d bytes under a %d-byte RLIMIT_FSIZE = %d, %v; want %d, EFBIG", len(p), limit, n, err, limit)
		}
		if n2 != 0 || !errors.Is(err2, syscall.EFBIG) {
			t.Fatalf("WriteAt at the limit = %d, %v; want 0, EFBIG", n2, err2)
		}
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Op != "write" || pe.Path != name {
			t.Fatalf("error %#v: want an *os.PathError for write naming %s", err, name)
		}
		got := make([]byte, len(p))
		if m, err := f.ReadAt(got, 0); m != limit || err != io.EOF || !bytes.Equal(got[:m], p[:limit]) {
			t.Fatalf("read back = %d, %v; want the %d bytes before the limit and io.EOF", m, err, limit)
		}
	})
}
