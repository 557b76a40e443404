// Package udpreal holds tests only: real programs written against net's
// UDP (a quic-go server, a miekg/dns server) run unmodified on ringpoll
// PacketConns, on every engine, loaded by their own clients over std
// sockets while a hostile sender mixes in datagrams longer than their
// buffers, empty ones and garbage. Both libraries stop serving on the
// first read error that is not Temporary, so these tests fail if a
// PacketConn returns an error net would not.
package udpreal
