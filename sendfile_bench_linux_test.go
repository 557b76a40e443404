package ringpoll

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkSendFile: one connection sends ranges of a 64 MiB file (in the
// page cache) of each size, one after the other, to a std net reader in
// the same process, by four means:
//
//   - uring: Conn.SendFile on the uring engine, sendfile(2) on the
//     calling goroutine;
//   - epoll: the same on epoll;
//   - sendfile: a plain loop of sendfile(2) on a std *net.TCPConn, waiting
//     for room in Go's poller (RawConn.Write), as net's own sendfile does;
//   - copy: pread into a buffer and Conn.Write on the uring engine, the
//     bytes copied twice.
//
// cpu-ns/op is the process's user and system time per range (getrusage;
// it includes the reader and the kernel's io_uring workers, which are
// threads of the process), the figure to compare beside ns/op's wall
// time.
//
//	go test -run NONE -bench BenchmarkSendFile -benchtime 2000x -count 5
func BenchmarkSendFile(b *testing.B) {
	const fileSize = 64 << 20
	name := filepath.Join(b.TempDir(), "payload")
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i * 7)
	}
	w, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	for range fileSize / len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, size := range []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20} {
		for _, kind := range []string{"uring", "epoll", "sendfile", "copy"} {
			b.Run(fmt.Sprintf("%s/%dKiB", kind, size>>10), func(b *testing.B) {
				benchSendFile(b, name, fileSize, size, kind)
			})
		}
	}
}

func benchSendFile(b *testing.B, name string, fileSize, size int64, kind string) {
	if kind == "uring" || kind == "copy" {
		if err := UringStatus(); err != nil {
			b.Skipf("io_uring unavailable: %v", err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		n, _ := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
		got <- n
	}()
	send, done := benchSender(b, ln.Addr().String(), name, kind)
	b.SetBytes(size)
	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := range b.N {
		off := int64(i) * size % (fileSize - size + 1)
		if err := send(off, size); err != nil {
			b.Fatal(err)
		}
	}
	done()
	total := <-got
	b.StopTimer()
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	if total != int64(b.N)*size {
		b.Fatalf("the reader got %d bytes, want %d", total, int64(b.N)*size)
	}
	cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// benchSender dials addr and returns a function that sends a range of the
// file by kind's means, and one that closes the sending side.
func benchSender(b *testing.B, addr, name, kind string) (send func(off, n int64) error, done func()) {
	switch kind {
	case "sendfile":
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		rc, err := c.(*net.TCPConn).SyscallConn()
		if err != nil {
			b.Fatal(err)
		}
		send = func(off, n int64) error {
			var serr error
			err := rc.Write(func(s uintptr) bool {
				for n > 0 {
					m, err := unix.Sendfile(int(s), int(f.Fd()), &off, int(n))
					if m > 0 {
						n -= int64(m)
						continue
					}
					if err == nil {
						serr = io.ErrUnexpectedEOF
						return true
					}
					if err == unix.EAGAIN {
						return false // wait in Go's poller for room
					}
					if err != unix.EINTR {
						serr = err
						return true
					}
				}
				return true
			})
			if err != nil {
				return err
			}
			return serr
		}
		return send, func() { c.Close(); f.Close() }
	}
	e := EngineUring
	if kind == "epoll" {
		e = EngineEpoll
	}
	c, err := Dial("tcp", addr, WithEngine(e))
	if err != nil {
		b.Fatal(err)
	}
	f, err := OpenFile(name, os.O_RDONLY, 0, WithEngine(e))
	if err != nil {
		b.Fatal(err)
	}
	done = func() { c.Close(); f.Close() }
	if kind != "copy" {
		return func(off, n int64) error {
			_, err := c.SendFile(f, off, n)
			return err
		}, done
	}
	buf := make([]byte, 256<<10)
	return func(off, n int64) error {
		for n > 0 {
			p := buf[:min(n, int64(len(buf)))]
			if _, err := f.ReadAt(p, off); err != nil {
				return err
			}
			if _, err := c.Write(p); err != nil {
				return err
			}
			off += int64(len(p))
			n -= int64(len(p))
		}
		return nil
	}, done
}
