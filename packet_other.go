//go:build !linux

package ringpoll

import (
	"errors"
	"net"
)

// Off Linux the packet API builds, and ListenPacket, DialPacket and
// NewBatch fail with an error wrapping errors.ErrUnsupported.

// PacketConn is a UDP socket with batched I/O; it needs Linux.
type PacketConn struct{}

// Batch is memory for reading many datagrams with one call; it needs Linux.
type Batch struct{}

// ListenPacket fails off Linux.
func ListenPacket(network, address string, opts ...Option) (*PacketConn, error) {
	return nil, &net.OpError{Op: "listen", Net: network, Err: unsupported(inListenPacket, opts)}
}

// DialPacket fails off Linux.
func DialPacket(network, address string, opts ...Option) (*PacketConn, error) {
	return nil, &net.OpError{Op: "dial", Net: network, Err: unsupported(inDialPacket, opts)}
}

// unsupported is the error of constructor t off Linux: its options' own,
// as on Linux, or errors.ErrUnsupported.
func unsupported(t taker, opts []Option) error {
	if _, err := configFor(t, opts); err != nil {
		return err
	}
	return errors.ErrUnsupported
}

// NewBatch fails off Linux.
func NewBatch(count, size int) (*Batch, error) { return nil, errors.ErrUnsupported }
