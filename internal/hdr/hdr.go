// Package hdr is a latency histogram in the style of HdrHistogram: buckets
// whose width grows with the value (log-linear), so every recorded value is
// kept within a fixed relative error, at a fixed memory cost, and two
// histograms merge by adding their counts.
//
// Values are nanoseconds. Each power of two is split into 32 buckets, so a
// bucket is at most 1/32 (3.1%) of its lower bound wide, and a quantile,
// interpolated within its bucket, is within about 1.6% of the true value.
// Values from 2^36 ns (about 69 s) up share the last bucket.
package hdr

import (
	"math"
	"math/bits"
	"time"
)

const (
	subBits = 5
	sub     = 1 << subBits // buckets per power of two
	maxBits = 36
	// Buckets is the number of buckets in a Histogram.
	Buckets = (maxBits - subBits + 1) * sub
)

// Histogram counts durations. The zero value is empty and ready to use; it is
// not safe for concurrent use (give each goroutine its own and Merge them).
type Histogram struct {
	counts [Buckets]uint64
	total  uint64
	max    uint64
}

// bucket returns the index of the bucket holding v.
func bucket(v uint64) int {
	if v < sub {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1
	i := (e+1)*sub + int((v>>e)&(sub-1))
	return min(i, Buckets-1)
}

// low is the smallest value in bucket i.
func low(i int) uint64 {
	if i < sub {
		return uint64(i)
	}
	e := i/sub - 1
	return uint64(sub+i%sub) << e
}

// width is the number of values bucket i holds.
func width(i int) uint64 {
	if i < sub {
		return 1
	}
	return 1 << (i/sub - 1)
}

// Record counts one duration; negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucket(v)]++
	h.total++
	h.max = max(h.max, v)
}

// RecordN counts n equal durations.
func (h *Histogram) RecordN(d time.Duration, n uint64) {
	if n == 0 {
		return
	}
	v := uint64(max(d, 0))
	h.counts[bucket(v)] += n
	h.total += n
	h.max = max(h.max, v)
}

// Merge adds o's counts to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// Count returns the number of durations recorded.
func (h *Histogram) Count() uint64 { return h.total }

// Max returns the largest duration recorded, exactly, or 0.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Quantile returns quantile q (0 < q <= 1): the smallest recorded value
// with at least q of the count at or below it, interpolated linearly within
// its bucket and never above Max. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, n := range h.counts {
		if seen+n >= rank {
			// The rank-th value, taking the n in this bucket as spread
			// evenly over it.
			frac := (float64(rank-seen) - 0.5) / float64(n)
			v := low(i) + uint64(frac*float64(width(i)))
			return time.Duration(min(v, h.max))
		}
		seen += n
	}
	return time.Duration(h.max)
}
