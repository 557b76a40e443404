package ringpoll

import (
	"context"
	"errors"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ListenPacketGroup opens sockets sharing one UDP address with
// SO_REUSEPORT: as many as WithReusePort says (default GOMAXPROCS), the
// first bound to the address asked (port 0 picks one) and the rest to the
// same. The kernel spreads datagrams over them by a hash of the addresses,
// or, with WithCPUSteering, by the CPU that received them. Serve them with
// a PacketServer, or read each on a goroutine of its own. Options:
// WithEngine, WithLogger, WithReusePort, WithCPUSteering, WithGRO,
// WithoutGSO.
func ListenPacketGroup(network, address string, opts ...Option) ([]*PacketConn, error) {
	cfg, err := packetConfig(inListenPacketGroup, network, opts)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: network, Err: err}
	}
	return listenPacketGroup(network, address, cfg)
}

func listenPacketGroup(network, address string, cfg *config) ([]*PacketConn, error) {
	n := cfg.reusePort
	if n == 0 {
		n = runtime.GOMAXPROCS(0)
		c := *cfg
		c.reusePort = n // for packetControl: SO_REUSEPORT
		cfg = &c
	}
	lc := net.ListenConfig{Control: cfg.packetControl}
	var conns []*PacketConn
	fail := func(err error) ([]*PacketConn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	for i := range n {
		pc, err := lc.ListenPacket(context.Background(), network, address)
		if err != nil {
			return fail(err)
		}
		c, err := newPacketConn(pc.(*net.UDPConn), network, false, cfg)
		if err != nil {
			return fail(err)
		}
		conns = append(conns, c)
		if i == 0 {
			address = c.LocalAddr().String()
		}
	}
	if cfg.steerCPU {
		if err := steerByCPU(conns[0], len(conns)); err != nil {
			return fail(&net.OpError{Op: "listen", Net: network, Source: conns[0].LocalAddr(), Err: err})
		}
	}
	return conns, nil
}

// Classic BPF's ancillary load of the current CPU's number.
const (
	skfAdOff = 0xfffff000 // SKF_AD_OFF, -0x1000
	skfAdCPU = 36         // SKF_AD_CPU
)

// steerByCPU attaches to a reuseport group a program choosing socket
// (CPU mod n) for each datagram.
func steerByCPU(c *PacketConn, n int) error {
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdOff + skfAdCPU},
		{Code: unix.BPF_ALU | unix.BPF_MOD | unix.BPF_K, K: uint32(n)},
		{Code: unix.BPF_RET | unix.BPF_A},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	var serr error
	err := c.control(func(fd int) {
		serr = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return errors.Join(errors.New("ringpoll: attaching the CPU steering program (SO_ATTACH_REUSEPORT_CBPF)"), err)
	}
	return nil
}
