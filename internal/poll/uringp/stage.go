//go:build linux

package uringp

import "github.com/ringpoll/ringpoll/internal/uring"

// Small sends are copied into a staging buffer outside the Go heap and go
// out from there, instead of pinning the output queue's memory for the
// kernel (runtime.Pinner). A pin and its unpin take the runtime's span
// lock and cost more than copying a few KiB. Larger
// sends are pinned and go out without a copy.
//
// A buffer is held only while its send is in flight, and sends never wait
// in the kernel (MSG_DONTWAIT), so a loop needs few: when all are taken, a
// send falls back to pinning.
const (
	stageSize  = 4 << 10 // the largest send that is copied
	stageCount = 64      // staging buffers per loop
)

// conn.staged keeps a staging buffer's index+1 in a byte.
const _ = uint8(stageCount)

// stager is a loop's staging buffers. Only the loop goroutine uses it.
type stager struct {
	arena *uring.Arena
	free  []uint16 // indexes of free buffers
}

func newStager() (*stager, error) {
	a, err := getArena(stageCount, stageSize)
	if err != nil {
		return nil, err
	}
	s := &stager{arena: a, free: make([]uint16, stageCount)}
	for i := range s.free {
		s.free[i] = uint16(stageCount - 1 - i)
	}
	return s, nil
}

// stage copies iov into a free buffer and returns the bytes to send and
// the buffer's index plus one, or ok false when iov is too big or no
// buffer is free.
func (s *stager) stage(iov [][]byte) (p []byte, ref uint16, ok bool) {
	n := 0
	for _, b := range iov {
		n += len(b)
	}
	if n > stageSize || len(s.free) == 0 {
		return nil, 0, false
	}
	i := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	buf := s.arena.Buf(int(i))
	n = 0
	for _, b := range iov {
		n += copy(buf[n:], b)
	}
	return buf[:n], i + 1, true
}

// unstage frees the buffer stage returned ref for.
func (s *stager) unstage(ref uint16) { s.free = append(s.free, ref-1) }

func (s *stager) close() { putArena(s.arena) }
