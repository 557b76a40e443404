package main

import (
	"context"
	"fmt"
	"net"

	"github.com/quic-go/quic-go"
	"github.com/ringpoll/ringpoll"

	"github.com/ringpoll/ringpoll/bench/internal/quicbench"
)

// The answers the QUIC checks ask for: what the scenarios ask per stream
// by default.
const (
	quicBulkCheckSize  = 4 << 20
	quicSmallCheckSize = 64
)

// listenUDP makes the socket a quic-* kind serves on: a ringpoll
// PacketConn on the default engine, as a MessageConn so that quic-go's
// reads go through its ReadBatch too (quic-ringpoll), or a std
// *net.UDPConn (quic-std). quic-go takes its fast path (GSO, ECN, batched
// reads) on both.
func listenUDP(kind, addr string) (net.PacketConn, error) {
	if kind == "quic-ringpoll" {
		pc, err := ringpoll.ListenPacket("udp", addr)
		if err != nil {
			return nil, err
		}
		return pc.MessageConn(), nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	return net.ListenUDP("udp", ua)
}

// startQUIC serves quicbench's protocol on the kind's UDP socket
// (quicbench.Start).
func startQUIC(cfg config) (*running, error) {
	conn, err := listenUDP(cfg.kind, cfg.addr)
	if err != nil {
		return nil, err
	}
	s, err := quicbench.Start(conn)
	if err != nil {
		return nil, err
	}
	r := &running{addr: conn.LocalAddr().String(), done: make(chan error, 1)}
	stopping := make(chan struct{})
	go func() {
		<-s.Done()
		select {
		case <-stopping:
		default:
			r.done <- s.Err()
		}
	}()
	r.stop = func(ctx context.Context) error {
		close(stopping)
		return s.Stop(ctx)
	}
	return r, nil
}

// checkQUIC asks the server at addr for one answer of size bytes and
// checks every byte.
func checkQUIC(ctx context.Context, addr string, size int64) (string, error) {
	conn, err := quic.DialAddr(ctx, addr, quicbench.ClientTLS(), nil)
	if err != nil {
		return "", err
	}
	defer conn.CloseWithError(0, "")
	if _, err := quicbench.Ask(ctx, conn, size, make([]byte, 64<<10), true); err != nil {
		return "", err
	}
	st := conn.ConnectionState()
	return fmt.Sprintf("%d bytes of the pattern on a stream, ALPN %q", size, st.TLS.NegotiatedProtocol), nil
}
