//go:build linux

package main

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll"
)

// TestReproLostReset is the regression test of a bug ringsoak found: on
// the uring and uring-sqpoll engines a server connection whose peer reset
// it could keep its reader blocked for ever. The connection's input had
// been paused at its high-water mark and resumed (the multishot receive
// re-armed); the loop's own send of the echo then failed with ECONNRESET,
// and the re-armed receive never posted its final completion although the
// socket was at EOF (poll(2): POLLIN|POLLHUP, recv(MSG_PEEK) = 0, TCP state
// CLOSE; the ring's fdinfo still listed the receive). About 1 in 30 to 1 in
// 150 such connections hung until the idle timeout or a Shutdown. The fix
// ends input when a loop send fails with ECONNRESET or EPIPE
// (internal/poll/uringp, sendDone).
//
// A conn-API echo server (Read, Write back) with 256 KiB high-water marks;
// each client writes 512 KiB while reading 8 KiB of the echo, then closes
// with the rest unread, so the kernel sends a RST. The server's reader
// starts only once its input reached the high-water mark (Reader.Peek of
// that many bytes), so every connection's input is paused and then
// resumed, however fast either side runs. The server's Read must then fail
// (EOF or reset), for 300 clients on every engine. The bug is a hang for
// good, so a reader still blocked after hangBound counts as hung: the bound
// only has to outlast a slow or loaded machine.
func TestReproLostReset(t *testing.T) {
	engines := []ringpoll.Engine{ringpoll.EngineEpoll, ringpoll.EngineUring, ringpoll.EngineUringHybrid,
		ringpoll.EngineUringReactor, ringpoll.EngineUringSQPoll}
	for _, e := range engines {
		t.Run(e.String(), func(t *testing.T) {
			if e != ringpoll.EngineEpoll {
				if err := ringpoll.UringStatus(); err != nil {
					t.Skip("io_uring unavailable:", err)
				}
			}
			if hung := reproLostReset(t, e, 300); hung != "" {
				t.Fatal(hung)
			}
		})
	}
}

// hangBound is how long a server reader may take to see its client's reset
// before it counts as hung, and bounds the clients' own I/O.
const hangBound = 20 * time.Second

// reproLostReset runs up to iters clients one after another against a
// conn-API echo server on engine e and describes the first server
// connection still reading hangBound after its client reset it, or returns
// "".
func reproLostReset(t *testing.T, e ringpoll.Engine, iters int) string {
	const (
		highWater = 256 << 10
		total     = 512 << 10
		readBack  = 8 << 10
	)
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", ringpoll.WithEngine(e), ringpoll.WithLoops(1),
		ringpoll.WithInputHighWater(highWater), ringpoll.WithOutputHighWater(highWater))
	if err != nil {
		t.Fatal(err)
	}
	type served struct {
		c    *ringpoll.Conn
		done chan struct{}
		read int64 // under mu
	}
	var (
		mu     sync.Mutex
		byPort = map[int]*served{}
		wg     sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.AcceptConn()
			if err != nil {
				return
			}
			s := &served{c: c, done: make(chan struct{})}
			mu.Lock()
			byPort[c.RemoteAddr().(*net.TCPAddr).Port] = s
			mu.Unlock()
			wg.Go(func() {
				defer close(s.done)
				defer c.Close()
				// Read nothing until the input holds highWater bytes:
				// the loop has paused it then (Peek consumes nothing, and
				// asks for no more than the mark), and the reads below
				// resume it. An error (the client gave up) is Read's to
				// report.
				c.Reader().Peek(highWater)
				buf := make([]byte, 32<<10)
				for {
					n, err := c.Read(buf)
					mu.Lock()
					s.read += int64(n)
					mu.Unlock()
					if n > 0 {
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	defer func() {
		ln.Close()
		mu.Lock()
		for _, s := range byPort {
			s.c.Close() // unblocks a stuck reader
		}
		mu.Unlock()
		wg.Wait()
	}()

	msg := make([]byte, 64<<10)
	for i := range iters {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), hangBound)
		if err != nil {
			t.Fatal(err)
		}
		port := c.LocalAddr().(*net.TCPAddr).Port
		written := make(chan struct{})
		go func() {
			defer close(written)
			for sent := 0; sent < total; sent += len(msg) {
				c.SetWriteDeadline(time.Now().Add(hangBound))
				if _, err := c.Write(msg); err != nil {
					return
				}
			}
		}()
		c.SetReadDeadline(time.Now().Add(hangBound))
		if _, err := io.ReadFull(c, make([]byte, readBack)); err != nil {
			t.Fatalf("client %d: reading the echo: %v", i, err)
		}
		<-written
		c.Close() // unread echo in the receive queue: a RST
		// The echo came from the server's reader, which starts only
		// after its connection is in byPort.
		mu.Lock()
		s := byPort[port]
		mu.Unlock()
		if s == nil {
			t.Fatalf("client %d: echoed by a connection the server did not register", i)
		}
		select {
		case <-s.done:
		case <-time.After(hangBound):
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("client %d of %d wrote %d bytes, read %d and closed (RST); %v later the server's Read "+
				"has still not returned (it read %d bytes); stats: %v", i+1, iters, total, readBack, hangBound, s.read, ln.Stats())
		}
	}
	return ""
}
