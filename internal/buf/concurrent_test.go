package buf

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// TestProducerOutsideLock exercises the documented exception: the producer
// calls WriteSpace and fills the slice without the mutex, then Commits under
// it, while the consumer drains under the mutex. Run it with -race.
func TestProducerOutsideLock(t *testing.T) {
	const total = 8 << 20
	tests := []struct {
		name    string
		maxMin  int  // WriteSpace min is drawn from [1, maxMin]
		grow    bool // producer toggles the grow hint
		consume func(b *LinkBuffer, rng *rand.Rand, dst []byte) []byte
	}{
		{"Next small writes", 2000, false, func(b *LinkBuffer, rng *rand.Rand, dst []byte) []byte {
			return append(dst, b.Next(rng.IntN(b.Len())+1)...)
		}},
		{"ReadInto large writes", 100000, true, func(b *LinkBuffer, rng *rand.Rand, dst []byte) []byte {
			p := make([]byte, rng.IntN(70000)+1)
			return append(dst, p[:b.ReadInto(p)]...)
		}},
		{"Slices Skip", 9000, true, func(b *LinkBuffer, rng *rand.Rand, dst []byte) []byte {
			n := 0
			for _, s := range b.Slices(nil, rng.IntN(3)+1) {
				dst = append(dst, s...)
				n += len(s)
			}
			b.Skip(n)
			return dst
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			b := New()
			done := make(chan struct{})
			go func() {
				defer close(done)
				rng := rand.New(rand.NewPCG(1, 2))
				for off := 0; off < total; {
					if tc.grow {
						b.SetGrowHint(rng.IntN(70000))
					}
					// Outside the mutex: the consumer runs meanwhile.
					sp := b.WriteSpace(rng.IntN(tc.maxMin) + 1)
					n := min(len(sp), total-off, rng.IntN(len(sp))+1)
					fillPattern(sp[:n], off)
					off += n
					mu.Lock()
					b.Commit(n)
					mu.Unlock()
				}
			}()

			rng := rand.New(rand.NewPCG(3, 4))
			got := make([]byte, 0, 64<<10)
			for off := 0; off < total; {
				mu.Lock()
				if b.Len() > 0 {
					got = tc.consume(b, rng, got[:0])
					// Verify before Release: Next slices die there.
					if !bytesMatchPattern(got, off) {
						mu.Unlock()
						t.Fatalf("corrupt data at stream offset %d", off)
					}
					off += len(got)
					b.Release()
				}
				mu.Unlock()
				runtime.Gosched()
			}
			<-done
			if b.Len() != 0 {
				t.Fatalf("Len = %d after draining", b.Len())
			}
			b.Discard()
		})
	}
}

func bytesMatchPattern(p []byte, off int) bool {
	for i, c := range p {
		x := off + i
		if c != byte(x^x>>8^x>>16) {
			return false
		}
	}
	return true
}

func BenchmarkWriteCommitNextRelease(b *testing.B) {
	const size = 1 << 10
	lb := New()
	msg := make([]byte, size)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		sp := lb.WriteSpace(size)
		lb.Commit(copy(sp, msg))
		if p := lb.Next(size); len(p) != size {
			b.Fatal("short Next")
		}
		lb.Release()
	}
	lb.Discard()
}

func BenchmarkAppendSkipRelease(b *testing.B) {
	for _, size := range []int{64, 1 << 10, 100 << 10} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			lb := New()
			msg := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				lb.Append(msg)
				lb.Skip(size)
				lb.Release()
			}
			lb.Discard()
		})
	}
}

// TestShareAcrossGoroutines: the consumer shares chunks of a buffer whose
// producer writes outside the mutex, and another goroutine checks and
// frees each chunk while the consumer releases its side and the producer
// takes pooled nodes again: no byte a chunk shows may change before that
// goroutine freed it. Run it with -race.
func TestShareAcrossGoroutines(t *testing.T) {
	const total = 4 << 20
	var mu sync.Mutex
	b := New()
	go func() {
		rng := rand.New(rand.NewPCG(5, 6))
		for off := 0; off < total; {
			sp := b.WriteSpace(rng.IntN(9000) + 1)
			n := min(len(sp), total-off, rng.IntN(len(sp))+1)
			fillPattern(sp[:n], off)
			off += n
			mu.Lock()
			b.Commit(n)
			mu.Unlock()
		}
	}()
	type chunk struct {
		b   *LinkBuffer
		off int
	}
	chunks := make(chan chunk, 16)
	checked := make(chan error, 1)
	go func() {
		var err error
		for c := range chunks {
			got := c.b.Next(c.b.Len())
			runtime.Gosched() // let the others reuse memory meanwhile
			if err == nil && !bytesMatchPattern(got, c.off) {
				err = fmt.Errorf("a shared chunk at stream offset %d changed", c.off)
			}
			c.b.Release()
			c.b.Discard()
		}
		checked <- err
	}()
	rng := rand.New(rand.NewPCG(7, 8))
	for off := 0; off < total; {
		mu.Lock()
		if n := b.Len(); n > 0 {
			n = rng.IntN(n) + 1
			dst := New()
			b.Share(dst, n)
			b.Release()
			chunks <- chunk{dst, off}
			off += n
		}
		mu.Unlock()
		runtime.Gosched()
	}
	close(chunks)
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	b.Discard()
}
