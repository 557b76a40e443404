// Package epoll is ringpoll's classic reactor engine, and the fallback
// wherever io_uring is missing or forbidden.
//
// Each loop owns one epoll instance. Sockets are registered once, for
// EPOLLIN|EPOLLOUT|EPOLLRDHUP edge-triggered, and never modified: pausing
// input for backpressure is a flag the loop checks, not an epoll_ctl, and
// EPOLLOUT edges cost nothing when no output waits. That is one epoll_ctl per
// connection lifetime (the Go runtime's netpoller makes the same choice). The
// price of edge triggering is that the loop must read until EAGAIN (or a
// short read without a hang-up in the event) and must read again by itself
// after a pause, which Resume does.
package epoll

import (
	"sync/atomic"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Engine is a set of epoll loops; connections are spread over them round
// robin.
type Engine struct {
	loops []*loop
	next  atomic.Uint32
}

// New starts n epoll loops.
func New(n int) (*Engine, error) {
	e := &Engine{}
	for range n {
		l, err := newLoop()
		if err != nil {
			e.Stop()
			return nil, err
		}
		e.loops = append(e.loops, l)
		go l.run()
	}
	return e, nil
}

// Name returns "epoll".
func (e *Engine) Name() string { return "epoll" }

// Register attaches fd to the next loop. Safe for concurrent use.
func (e *Engine) Register(fd *poll.FD) error {
	l := e.loops[int(e.next.Add(1)-1)%len(e.loops)]
	fd.DirectWrite = true
	fd.Loop = l
	return l.add(fd)
}

// Stats returns each loop's counters.
func (e *Engine) Stats() []*poll.Stats {
	s := make([]*poll.Stats, len(e.loops))
	for i, l := range e.loops {
		s[i] = &l.stats
	}
	return s
}

// Stop ends the loops. Every FD must have been destroyed.
func (e *Engine) Stop() {
	for _, l := range e.loops {
		l.post(task{kind: taskStop})
	}
}
