package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ioTimeout bounds one connection's dial and echo.
const ioTimeout = 10 * time.Second

// echoOnce sends a small message tagged with id and checks that exactly it
// comes back.
func echoOnce(c net.Conn, id int) error {
	msg := fmt.Appendf(nil, "ringidle %010d\n", id)
	if err := c.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		return err
	}
	if _, err := c.Write(msg); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read echo: %w", err)
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return c.SetDeadline(time.Time{})
}

// dialer returns the net.Dialer for source address number src (127.0.0.1
// plus src). With one source the kernel picks the address as usual; with
// several each dial binds its address with IP_BIND_ADDRESS_NO_PORT, so the
// port is still chosen at connect time from the whole 4-tuple space.
func dialer(sources, src int) *net.Dialer {
	d := &net.Dialer{Timeout: ioTimeout}
	if sources == 1 {
		return d
	}
	d.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+src))}
	d.Control = func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}
	return d
}

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (linux/in.h), which the
// syscall package lacks.
const ipBindAddressNoPort = 24

// forEach runs f(i) for i in [0, n) on workers goroutines, stopping early
// (and returning the first error) once one fails or ctx ends.
func forEach(ctx context.Context, n, workers int, f func(i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		// The caller's context ended (ours is cancelled only on error).
		firstErr = context.Cause(ctx)
	}
	return firstErr
}

// openConns opens n connections to addr, dialers at a time, spread over
// the source addresses, and, with talk, echoes once on each. On error it
// closes those it opened.
func openConns(ctx context.Context, addr string, n, sources, dialers int, talk bool) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	dls := make([]*net.Dialer, sources)
	for i := range dls {
		dls[i] = dialer(sources, i)
	}
	err := forEach(ctx, n, dialers, func(i int) error {
		c, err := dls[i%sources].DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		conns[i] = c
		if !talk {
			return nil
		}
		if err := echoOnce(c, i); err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		closeConns(conns)
		return nil, err
	}
	return conns, nil
}

// warmUp makes rounds echo round trips on a few connections, at once, then
// closes them.
func warmUp(ctx context.Context, addr string, rounds int) error {
	if rounds == 0 {
		return nil
	}
	const conns = 4
	cs, err := openConns(ctx, addr, conns, 1, conns, true)
	if err != nil {
		return err
	}
	defer closeConns(cs)
	return forEach(ctx, conns, conns, func(i int) error {
		for r := i; r < rounds; r += conns {
			if err := echoOnce(cs[i], r); err != nil {
				return fmt.Errorf("warm-up round %d: %w", r, err)
			}
		}
		return nil
	})
}

// checkConns echoes once more on every connection and returns how many
// failed, with the first error.
func checkConns(ctx context.Context, conns []net.Conn, workers int) (int, error) {
	var (
		failed   atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	err := forEach(ctx, len(conns), workers, func(i int) error {
		if err := echoOnce(conns[i], i); err != nil {
			failed.Add(1)
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("connection %d: %w", i, err)
			}
			mu.Unlock()
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return int(failed.Load()), err
	}
	return int(failed.Load()), firstErr
}

// closeConns closes every non-nil connection.
func closeConns(conns []net.Conn) {
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}
