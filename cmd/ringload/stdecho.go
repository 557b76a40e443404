//go:build linux

package main

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/internal/connset"
	"github.com/ringpoll/ringpoll/internal/rpcframe"
)

// serveStd runs the reference server: std net, one goroutine per
// connection. With proto "echo" each echoes with a plain Read/Write loop
// through a buffer of bufSize bytes (not io.Copy, which would splice
// between the sockets); with "rpc" it answers length-prefixed frames with
// rpcframe.Serve. TCP_NODELAY is net's default. ready, if set, is told the
// address once the server listens. It returns nil when ctx ends, after
// closing the listener and giving open connections 2 s to hang up before
// closing them.
func serveStd(ctx context.Context, addr, proto string, bufSize int, ready func(net.Addr)) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if ready != nil {
		ready(ln.Addr())
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	serve := func(c net.Conn) { echoConn(c, bufSize) }
	if proto == "rpc" {
		serve = func(c net.Conn) { rpcframe.Serve(c, c, bufSize) }
	}

	var conns connset.Set
	var acceptErr error
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				// Out of descriptors or memory for now: back off, as
				// net/http does, rather than spin or give up.
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
				continue
			}
			acceptErr = err
			ln.Close()
			break
		}
		conns.Serve(c, serve)
	}
	conns.Wait(2 * time.Second)
	return acceptErr
}

// echoConn writes back everything it reads until the peer hangs up or an
// error.
func echoConn(c net.Conn, bufSize int) {
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
