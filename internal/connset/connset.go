// Package connset keeps the connections a command's server serves, each
// on a goroutine of its own (cmd/ringecho's goroutine-per-connection
// modes, cmd/ringload's std server), so that its shutdown can wait for
// them and cut off those that outstay a grace period.
package connset

import (
	"net"
	"sync"
	"time"
)

// Set is the connections being served. The zero Set is empty and ready.
type Set struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Serve runs serve(c) on a goroutine of its own, then closes c.
func (s *Set) Serve(c net.Conn, serve func(net.Conn)) {
	s.mu.Lock()
	if s.conns == nil {
		s.conns = map[net.Conn]struct{}{}
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.wg.Go(func() {
		serve(c)
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	})
}

// Wait waits until every connection is served; at grace it closes those
// left, which ends their reads and writes. Call it once no more Serve
// calls come.
func (s *Set) Wait(grace time.Duration) {
	cut := time.AfterFunc(grace, s.closeAll)
	s.wg.Wait()
	cut.Stop()
}

// closeAll closes the connections being served.
func (s *Set) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}
