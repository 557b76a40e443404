package hertz

import (
	"context"
	"errors"
	"os"
	"time"
)

// senseConn is a Conn for a server with SenseClientDisconnection: while a
// request's handler runs, a goroutine waits on the connection's input, and
// cancels the request's context if the peer closes or resets it. Hertz's
// HTTP/1 server finds the two methods by a type assertion.
type senseConn struct {
	*Conn
	cancel context.CancelFunc
	done   chan struct{}
}

func newSenseConn(c *Conn, cancel context.CancelFunc) *senseConn {
	return &senseConn{Conn: c, cancel: cancel, done: make(chan struct{}, 1)}
}

// DetectConnectionClose starts watching the connection; Hertz calls it
// once a request is read, before its handler runs, and reads nothing
// until AbortBlockingRead returns.
func (s *senseConn) DetectConnectionClose() {
	s.rc.SetReadDeadline(time.Time{})
	go func() {
		// A byte of a pipelined request ends the wait as well; it stays
		// buffered for the next request.
		if _, err := s.r.Peek(1); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			s.cancel()
		}
		s.done <- struct{}{}
	}()
}

// AbortBlockingRead stops the watch and returns once it has stopped; Hertz
// calls it after the handler, before writing the response.
func (s *senseConn) AbortBlockingRead() {
	s.rc.SetReadDeadline(time.Unix(1, 0)) // in the past: the wait ends now
	<-s.done
	s.rc.SetReadDeadline(time.Time{})
}
