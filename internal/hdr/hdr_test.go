package hdr

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBuckets(t *testing.T) {
	// Every value lies in its bucket, buckets tile the range with no gap,
	// and no bucket is wider than 1/32 of its lower bound.
	for _, v := range []uint64{0, 1, 31, 32, 33, 63, 64, 65, 1000, 123456, 1 << 30, 1<<36 - 1} {
		i := bucket(v)
		if lo, w := low(i), width(i); v < lo || v >= lo+w {
			t.Errorf("value %d in bucket %d = [%d, %d)", v, i, lo, lo+w)
		}
	}
	for i := 0; i+1 < Buckets; i++ {
		if low(i)+width(i) != low(i+1) {
			t.Fatalf("bucket %d ends at %d, bucket %d starts at %d", i, low(i)+width(i), i+1, low(i+1))
		}
		if i >= sub && width(i)*sub > low(i) {
			t.Fatalf("bucket %d: width %d over 1/32 of %d", i, width(i), low(i))
		}
	}
	if i := bucket(1 << 40); i != Buckets-1 {
		t.Errorf("2^40 in bucket %d, want the last, %d", i, Buckets-1)
	}
}

func TestEmpty(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Count() != 0 || h.Max() != 0 {
		t.Errorf("empty: q50 %v count %d max %v", h.Quantile(0.5), h.Count(), h.Max())
	}
}

// TestQuantileAccuracy checks every tail quantile against the exact order
// statistic of random samples from a long-tailed distribution.
func TestQuantileAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 200000
	var h Histogram
	vals := make([]time.Duration, n)
	for i := range vals {
		// Log-uniform from 1 µs to 100 ms.
		v := time.Duration(1e3 * math.Pow(10, 5*r.Float64()))
		vals[i] = v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999, 1} {
		exact := vals[int(q*n+0.5)-1]
		got := h.Quantile(q)
		if rel := float64(got-exact) / float64(exact); rel < -0.032 || rel > 0.032 {
			t.Errorf("q%v = %v, exact %v (%.2f%% off, want within 3.2%%)", q, got, exact, rel*100)
		}
	}
	if h.Max() != vals[n-1] {
		t.Errorf("Max = %v, want exactly %v", h.Max(), vals[n-1])
	}
	if h.Quantile(1) > h.Max() {
		t.Errorf("q1 %v above max %v", h.Quantile(1), h.Max())
	}
}

func TestMergeAndRecordN(t *testing.T) {
	var a, b, c Histogram
	for us := 1; us <= 1000; us++ {
		d := time.Duration(us) * time.Microsecond
		if us%2 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
		c.Record(d)
	}
	a.Merge(&b)
	if a != c {
		t.Fatal("merging two halves differs from recording the whole")
	}
	for _, q := range []float64{0.5, 0.99, 1} {
		want := float64(q * 1000e3)
		if got := float64(a.Quantile(q)); got < want*0.985 || got > want*1.015 {
			t.Errorf("Quantile(%v) = %v ns, want %v ± 1.5%%", q, got, want)
		}
	}
	var n Histogram
	n.RecordN(5*time.Millisecond, 99)
	n.RecordN(time.Second, 0)
	n.Record(50 * time.Millisecond)
	if n.Count() != 100 || n.Max() != 50*time.Millisecond {
		t.Errorf("RecordN: count %d max %v", n.Count(), n.Max())
	}
	if q := n.Quantile(0.99); q < 5*time.Millisecond || q > 5160*time.Microsecond {
		t.Errorf("q99 = %v, want 5ms to 5ms+3.2%%", q)
	}
	if q := n.Quantile(0.999); q < 49*time.Millisecond || q > 50*time.Millisecond {
		t.Errorf("q99.9 = %v, want about 50ms", q)
	}
	var neg Histogram
	neg.Record(-time.Second)
	if neg.Quantile(1) != 0 || neg.Count() != 1 {
		t.Errorf("negative duration: q1 %v count %d", neg.Quantile(1), neg.Count())
	}
}
