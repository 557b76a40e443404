//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// slowloris is a crowd of connections that each send one byte every 1-2 s
// and check its echo: the slow clients a server must carry without making
// the others wait.
type slowloris struct {
	conns    int
	bytes    atomic.Int64
	errs     atomic.Int64
	firstErr atomic.Pointer[string]
	done     chan struct{}
	wg       sync.WaitGroup
	list     []net.Conn
	// firstDue spreads the first bytes (config.slowlorisFirst); first is
	// done when every connection has had its first byte echoed, or failed.
	firstDue time.Duration
	first    sync.WaitGroup
}

// startSlowloris connects cfg.slowloris connections (64 dials at a time)
// and starts their dribbling. Failed dials count as errors; none at all
// connecting is an error. With cfg.slowlorisFirst 0 it returns once every
// connection's first byte was echoed (or the connection failed).
func startSlowloris(ctx context.Context, cfg config) (*slowloris, error) {
	s := &slowloris{done: make(chan struct{}), firstDue: cfg.slowlorisFirst}
	if cfg.slowloris == 0 {
		return s, nil
	}
	var mu sync.Mutex
	sem := make(chan struct{}, 64)
	var dials sync.WaitGroup
	d := net.Dialer{Timeout: cfg.dialTimeout}
	for range cfg.slowloris {
		dials.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; dials.Done() }()
			c, err := d.DialContext(ctx, "tcp", cfg.addr)
			if err != nil {
				s.fail(fmt.Errorf("slowloris dial: %w", err))
				return
			}
			mu.Lock()
			s.list = append(s.list, c)
			mu.Unlock()
		}()
	}
	dials.Wait()
	s.conns = len(s.list)
	if s.conns == 0 {
		return nil, fmt.Errorf("no slowloris connection: %s", *s.firstErr.Load())
	}
	for i, c := range s.list {
		s.wg.Add(1)
		s.first.Add(1)
		go s.dribble(c, uint64(i))
	}
	if s.firstDue == 0 {
		s.first.Wait()
	}
	return s, nil
}

func (s *slowloris) fail(err error) {
	s.errs.Add(1)
	msg := err.Error()
	s.firstErr.CompareAndSwap(nil, &msg)
}

// dribble sends one byte every 1-2 s (random, so the crowd does not move in
// step; the first within firstDue) and reads its echo, until stop.
func (s *slowloris) dribble(c net.Conn, id uint64) {
	defer s.wg.Done()
	firstDone := false
	noteFirst := func() {
		if !firstDone {
			firstDone = true
			s.first.Done()
		}
	}
	defer noteFirst()
	r := rand.New(rand.NewPCG(id, 0x51))
	var due time.Duration
	if s.firstDue > 0 {
		due = time.Duration(r.Int64N(int64(s.firstDue)))
	}
	t := time.NewTimer(due)
	defer t.Stop()
	b := []byte{0}
	for i := uint64(0); ; i++ {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		want := byte(id + i)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b[0] = want
		if _, err := c.Write(b); err != nil {
			s.stopped(err)
			return
		}
		if _, err := c.Read(b); err != nil {
			s.stopped(err)
			return
		}
		if b[0] != want {
			s.fail(fmt.Errorf("slowloris conn %d: echoed %#x, sent %#x", id, b[0], want))
			return
		}
		s.bytes.Add(1)
		noteFirst()
		t.Reset(time.Second + time.Duration(r.Int64N(int64(time.Second))))
	}
}

// stopped counts err unless the crowd is being stopped (then it is the
// close that ended it).
func (s *slowloris) stopped(err error) {
	select {
	case <-s.done:
	default:
		s.fail(err)
	}
}

// stop ends the crowd and closes its connections.
func (s *slowloris) stop() {
	if s.conns == 0 {
		return
	}
	close(s.done)
	for _, c := range s.list {
		c.Close()
	}
	s.wg.Wait()
}
