//go:build linux

package ringpoll

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// echoServer starts an echo server and returns its address and a stop func.
type echoServer struct {
	name  string
	start func(b *testing.B) (addr string, stop func())
}

// echoServers is std net (goroutine per connection, the control) and, for
// every engine, ringpoll with each API style.
func echoServers() []echoServer {
	s := []echoServer{{"net", startStdEcho}}
	for _, e := range testEngines {
		s = append(s,
			echoServer{e.String() + "-handler", func(b *testing.B) (string, func()) { return startHandlerEcho(b, e) }},
			echoServer{e.String() + "-conn", func(b *testing.B) (string, func()) { return startConnEcho(b, e) }},
		)
	}
	return s
}

// BenchmarkEcho is a 1 KiB ping-pong over loopback: the same std net client
// against each server, with 1 and 16 connections. Client and server share
// the process (and its 2 Ps here), so compare rows of one run with each
// other, not with other machines. cmd/ringbench is the out-of-process,
// pinned benchmark.
func BenchmarkEcho(b *testing.B) {
	for _, conns := range []int{1, 16} {
		for _, srv := range echoServers() {
			b.Run(fmt.Sprintf("conns=%d/%s", conns, srv.name), func(b *testing.B) {
				addr, stop := srv.start(b)
				defer stop()
				benchPingPong(b, addr, conns, 1024)
			})
		}
	}
}

func benchPingPong(b *testing.B, addr string, conns, size int) {
	clients := make([]net.Conn, conns)
	for i := range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[i] = c
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	errc := make(chan error, conns)
	for i, c := range clients {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			msg, got := make([]byte, size), make([]byte, size)
			for range n {
				if _, err := c.Write(msg); err != nil {
					errc <- err
					return
				}
				if _, err := io.ReadFull(c, got); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
}

func startStdEcho(b *testing.B) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	return ln.Addr().String(), serveCopy(ln)
}

func startConnEcho(b *testing.B, e Engine) (string, func()) {
	ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e))
	if err != nil {
		b.Fatal(err)
	}
	return ln.Addr().String(), serveCopy(ln)
}

// serveCopy runs a goroutine per accepted connection copying input back;
// the returned func closes the listener and every connection and waits.
func serveCopy(ln net.Listener) func() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.Copy(c, c)
				c.Close()
			}()
		}
	}()
	return func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
}

func startHandlerEcho(b *testing.B, e Engine) (string, func()) {
	ln, err := Listen("tcp", "127.0.0.1:0", WithEngine(e))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(func(ctx context.Context, c *Conn) error {
		r, w := c.Reader(), c.Writer()
		p, err := r.Next(r.Len())
		if err != nil {
			return err
		}
		w.WriteBinary(p)
		if err := w.Flush(); err != nil {
			return err
		}
		return r.Release()
	})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(ln); close(done) }()
	return ln.Addr().String(), func() {
		srv.Shutdown(context.Background())
		<-done
	}
}
