package ringpoll

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkFileReadAt: random 4 KiB reads of a 256 MiB file by 64
// goroutines at once, through an os.File (a thread per read in flight)
// and through a File on the uring engine (requests on a loop's ring) and
// on epoll (system calls, as os.File), from the page cache and with
// O_DIRECT. cpu-ns/op is the process's user and system time per read
// (getrusage), the figure to compare with ns/op's wall time.
//
//	go test -run NONE -bench BenchmarkFileReadAt -benchtime 20000x -count 5
func BenchmarkFileReadAt(b *testing.B) {
	const size, rec, readers = 256 << 20, 4096, 64
	name := filepath.Join(b.TempDir(), "records")
	w, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for range size / len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	// On disk before the first read: write-back running under the first
	// kind measured would slow it and not the others.
	if err := w.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		for _, kind := range []string{"os", "uring", "epoll"} {
			b.Run(fmt.Sprintf("%s/direct=%v", kind, direct), func(b *testing.B) {
				flag := os.O_RDONLY
				if direct {
					flag |= unix.O_DIRECT
				}
				var readAt func([]byte, int64) (int, error)
				switch kind {
				case "os":
					f, err := os.OpenFile(name, flag, 0)
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					readAt = f.ReadAt
				default:
					e := EngineUring
					if kind == "epoll" {
						e = EngineEpoll
					} else if err := UringStatus(); err != nil {
						b.Skipf("io_uring unavailable: %v", err)
					}
					f, err := OpenFile(name, flag, 0, WithEngine(e))
					if err != nil {
						b.Fatal(err)
					}
					defer f.Close()
					readAt = f.ReadAt
				}
				var next atomic.Int64
				var failed atomic.Value
				var before, after unix.Rusage
				unix.Getrusage(unix.RUSAGE_SELF, &before)
				b.ResetTimer()
				var wg sync.WaitGroup
				for g := range readers {
					wg.Go(func() {
						buf := alignedBuf(rec)
						r := rand.New(rand.NewPCG(uint64(g), 1))
						for next.Add(1) <= int64(b.N) {
							off := int64(r.IntN(size/rec)) * rec
							if n, err := readAt(buf, off); n != rec || err != nil {
								failed.Store(fmt.Errorf("read at %d: %d, %v", off, n, err))
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				unix.Getrusage(unix.RUSAGE_SELF, &after)
				if err, _ := failed.Load().(error); err != nil {
					b.Fatal(err)
				}
				cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
				b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
