package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// gnetUDP is gnet's UDP server for ringbench's UDP scenario: one event
// loop, one socket; OnTraffic is called once per datagram (gnet reads one
// per recvfrom), counts it and, for udp-reply, writes it back to its
// sender. On SIGUSR1, and once at start, it writes {"seq":N,"packets":P}
// to the -stats-file, as ringecho does.
type gnetUDP struct {
	gnet.BuiltinEventEngine
	reply   bool
	stats   string
	packets atomic.Uint64
	mu      sync.Mutex // dumps
	seq     uint64
	stop    sync.Once
	eng     gnet.Engine
	addr    net.Addr
	booted  chan struct{}
	done    chan struct{}
	err     error
	stopSig chan os.Signal
}

func startGnetUDP(cfg config) (*gnetUDP, error) {
	s := &gnetUDP{reply: cfg.proto == protoUDPReply, stats: cfg.statsFile, booted: make(chan struct{}), done: make(chan struct{})}
	go func() {
		opts := []gnet.Option{gnet.WithNumEventLoop(1), gnet.WithLogger(gnetLogger{})}
		if cfg.rcvbuf > 0 {
			opts = append(opts, gnet.WithSocketRecvBuffer(cfg.rcvbuf))
		}
		s.err = gnet.Run(s, "udp://"+cfg.addr, opts...)
		close(s.done)
	}()
	select {
	case <-s.booted:
	case <-s.done:
		if s.err == nil {
			s.err = errors.New("gnet.Run returned before booting")
		}
		return nil, s.err
	}
	if s.stats != "" {
		if err := s.dump(); err != nil {
			s.Stop(context.Background())
			return nil, err
		}
		sig := make(chan os.Signal, 1)
		s.stopSig = sig
		signal.Notify(sig, syscall.SIGUSR1)
		go func() {
			for range sig {
				s.dump()
			}
		}()
	}
	return s, nil
}

func (s *gnetUDP) dump() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	tmp := s.stats + ".tmp"
	if err := os.WriteFile(tmp, fmt.Appendf(nil, `{"seq":%d,"packets":%d}`, s.seq, s.packets.Load()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, s.stats)
}

// OnBoot learns the bound address from a duplicate of the socket.
func (s *gnetUDP) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng = eng
	defer close(s.booted)
	fd, err := eng.Dup()
	if err != nil {
		s.err = err
		return gnet.Shutdown
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		s.err = err
		return gnet.Shutdown
	}
	if sa4, ok := sa.(*syscall.SockaddrInet4); ok {
		s.addr = &net.UDPAddr{IP: net.IP(sa4.Addr[:]).To16(), Port: sa4.Port}
	}
	return gnet.None
}

// OnTraffic gets one datagram.
func (s *gnetUDP) OnTraffic(c gnet.Conn) gnet.Action {
	b, _ := c.Next(-1)
	s.packets.Add(1)
	if s.reply {
		c.Write(b)
	}
	return gnet.None
}

func (s *gnetUDP) Addr() net.Addr        { return s.addr }
func (s *gnetUDP) Done() <-chan struct{} { return s.done }
func (s *gnetUDP) Err() error            { return s.err }

func (s *gnetUDP) Stop(ctx context.Context) error {
	s.stop.Do(func() {
		if s.stopSig != nil {
			signal.Stop(s.stopSig)
			close(s.stopSig)
		}
	})
	return s.eng.Stop(ctx)
}
