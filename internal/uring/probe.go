//go:build linux

package uring

import (
	"errors"
	"syscall"
)

// NewRingFallback sets up a ring with the first of flagSets the kernel
// accepts, on top of the other settings in p (CQ size, SQPOLL). EINVAL means
// a flag is unknown or a combination illegal, so the next set is tried; any
// other error ends the search.
func NewRingFallback(entries uint32, p Params, flagSets []uint32) (*Ring, error) {
	base := p.Flags
	var err error
	for _, f := range flagSets {
		q := p
		q.Flags = base | f
		var r *Ring
		if r, err = NewRing(entries, &q); err == nil {
			return r, nil
		}
		if !errors.Is(err, syscall.EINVAL) {
			return nil, err
		}
	}
	return nil, err
}
