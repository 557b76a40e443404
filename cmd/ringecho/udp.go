//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/benchfmt"
	"golang.org/x/net/ipv4"
)

// udpServer is ringecho on a UDP network: it counts the datagrams it
// receives and, with reply, sends each back to its sender.
type udpServer struct {
	network, addr, api string
	engine             ringpoll.Engine
	reply, gro         bool
	sockets            int
	statsFile          string
	log                *slog.Logger
	placement          []ringpoll.Option // -loop-cpus
	rcvbuf             int
	packets            atomic.Uint64
}

// udpAPIs are the ways ringecho serves UDP: ringpoll's PacketServer with
// the handler inline or pooled, and the two std ways, one datagram per call
// and x/net/ipv4's batches.
var udpAPIs = map[string]string{
	"inline":  "ringpoll PacketServer, handler on the reading goroutine",
	"handler": "ringpoll PacketServer, handler on a pooled goroutine",
	"conn":    "ringpoll PacketConn, ReadFromAddrPort and WriteToAddrPort, one datagram per call",
	"std":     "net.UDPConn, ReadFromUDPAddrPort and WriteToUDPAddrPort",
	"xnet":    "golang.org/x/net/ipv4 PacketConn, ReadBatch and WriteBatch of 64",
}

func (s *udpServer) run(ready func(net.Addr)) error {
	if _, ok := udpAPIs[s.api]; !ok {
		return fmt.Errorf("-api %q with -network %s: want inline, handler, conn, std or xnet", s.api, s.network)
	}
	if s.gro && s.api != "inline" && s.api != "handler" {
		return errors.New("-gro needs -api inline or handler")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var serve func() error
	var closeAll func()
	var local net.Addr
	switch s.api {
	case "inline", "handler":
		opts := []ringpoll.Option{ringpoll.WithEngine(s.engine), ringpoll.WithLogger(s.log)}
		sockOpts := opts[:len(opts):len(opts)]
		if s.sockets > 1 {
			sockOpts = append(sockOpts, ringpoll.WithReusePort(s.sockets))
		}
		if s.gro {
			sockOpts = append(sockOpts, ringpoll.WithGRO())
		}
		conns, err := ringpoll.ListenPacketGroup(s.network, s.addr, sockOpts...)
		if err != nil {
			return err
		}
		for _, c := range conns {
			if err := setRcvbuf(c, s.rcvbuf); err != nil {
				return err
			}
		}
		srvOpts := append(opts[:len(opts):len(opts)], s.placement...)
		if s.api == "inline" {
			srvOpts = append(srvOpts, ringpoll.WithInlineHandler())
		}
		srv, err := ringpoll.NewPacketServer(ringpoll.PacketHandlerFunc(s.handle), srvOpts...)
		if err != nil {
			return err
		}
		local = conns[0].LocalAddr()
		serve = func() error { return srv.Serve(conns...) }
		closeAll = func() { srv.Shutdown(context.Background()) }
		defer func() {
			for i, c := range conns {
				s.log.Info("ringecho socket stats", "socket", i, "stats", c.Stats().String())
			}
		}()
	case "conn":
		c, err := ringpoll.ListenPacket(s.network, s.addr, ringpoll.WithEngine(s.engine), ringpoll.WithLogger(s.log))
		if err != nil {
			return err
		}
		if err := setRcvbuf(c, s.rcvbuf); err != nil {
			c.Close()
			return err
		}
		local = c.LocalAddr()
		serve = func() error { return s.serveOneByOne(packetConn{c}) }
		closeAll = func() { c.Close() }
	default:
		pc, err := net.ListenPacket(s.network, s.addr)
		if err != nil {
			return err
		}
		uc := pc.(*net.UDPConn)
		if err := setRcvbuf(uc, s.rcvbuf); err != nil {
			return err
		}
		local = uc.LocalAddr()
		serve = func() error { return s.serveStd(uc) }
		closeAll = func() { uc.Close() }
	}
	s.log.Info("ringecho listening", "addr", local.String(), "network", s.network, "api", s.api, "reply", s.reply, "gro", s.gro, "sockets", s.sockets)
	if s.statsFile != "" {
		if err := s.dump(0); err != nil {
			return err
		}
		defer s.dumpOnSignal()()
	}
	if ready != nil {
		ready(local)
	}
	go func() {
		<-ctx.Done()
		closeAll()
	}()
	err := serve()
	s.log.Info("ringecho received", "packets", s.packets.Load())
	if errors.Is(err, ringpoll.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func (s *udpServer) handle(w *ringpoll.PacketWriter, in []ringpoll.Packet) {
	s.packets.Add(uint64(len(in)))
	if !s.reply {
		return
	}
	for _, p := range in {
		w.WriteTo(p.Data, p.Addr)
	}
}

// serveStd reads with package net, or x/net/ipv4 batches.
func (s *udpServer) serveStd(uc *net.UDPConn) error {
	if s.api == "xnet" {
		pc := ipv4.NewPacketConn(uc)
		ms := make([]ipv4.Message, 64)
		for i := range ms {
			ms[i].Buffers = [][]byte{make([]byte, 2048)}
		}
		for {
			n, err := pc.ReadBatch(ms, 0)
			if err != nil {
				return err
			}
			s.packets.Add(uint64(n))
			if s.reply {
				for i := range ms[:n] {
					ms[i].Buffers[0] = ms[i].Buffers[0][:ms[i].N]
				}
				if _, err := pc.WriteBatch(ms[:n], 0); err != nil {
					return err
				}
				for i := range ms[:n] {
					ms[i].Buffers[0] = ms[i].Buffers[0][:2048]
				}
			}
		}
	}
	return s.serveOneByOne(uc)
}

// datagramConn is what serveOneByOne needs of a socket: net's UDPConn
// has it, and a ringpoll PacketConn (-api conn).
type datagramConn interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// packetConn gives a ringpoll PacketConn net's method names.
type packetConn struct{ *ringpoll.PacketConn }

func (c packetConn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	return c.ReadFromAddrPort(b)
}

func (c packetConn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	return c.WriteToAddrPort(b, addr)
}

// serveOneByOne reads and answers one datagram per call, as a user of
// net's UDPConn writes it.
func (s *udpServer) serveOneByOne(c datagramConn) error {
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return err
		}
		s.packets.Add(1)
		if s.reply {
			if _, err := c.WriteToUDPAddrPort(buf[:n], from); err != nil {
				return err
			}
		}
	}
}

func (s *udpServer) dump(seq uint64) error {
	return benchfmt.WriteLoopTotals(s.statsFile, benchfmt.LoopTotals{Seq: seq, Packets: s.packets.Load()})
}

// dumpOnSignal writes the count on every SIGUSR1; it returns a function
// that stops it.
func (s *udpServer) dumpOnSignal() func() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		for seq := uint64(1); ; seq++ {
			select {
			case <-done:
				return
			case <-sig:
			}
			if err := s.dump(seq); err != nil {
				s.log.Warn("ringecho: writing stats", "err", err)
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
	}
}

func setRcvbuf(c interface{ SetReadBuffer(int) error }, n int) error {
	if n == 0 {
		return nil
	}
	return c.SetReadBuffer(n)
}
