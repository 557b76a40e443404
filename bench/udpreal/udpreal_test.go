package udpreal

import (
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"

	"github.com/ringpoll/ringpoll"
)

// listen opens the server's ringpoll PacketConn on engine e, closed at
// the end of the test (the servers close it too; a second Close only
// reports net.ErrClosed).
func listen(t *testing.T, e ringpoll.Engine) *ringpoll.PacketConn {
	t.Helper()
	pc, err := ringpoll.ListenPacket("udp4", "127.0.0.1:0", ringpoll.WithEngine(e))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// hostile sends datagrams no well-behaved client would to a server: a
// round is one of each, made once per test (so that concurrent rounds
// share them) from a fixed seed.
type hostile struct {
	c     *net.UDPConn
	to    *net.UDPAddr
	round [][]byte
	sent  atomic.Int64 // datagrams sent
}

// Sizes of the datagrams longer than the servers read: one byte over
// quic-go's packet buffer (1,452 B), and near the largest IPv4 datagram.
const (
	overQUICBuffer = 1453
	nearMaxIPv4    = 65000
)

// newHostile makes a hostile sender to addr, whose rounds hold datagrams
// longer than a server's buffer (1,453 and 65,000 B), empty ones, random
// bytes, and the protocol's own extras.
func newHostile(t *testing.T, addr net.Addr, extras ...[]byte) *hostile {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	rng := rand.New(rand.NewPCG(46, 1))
	h := &hostile{c: c, to: addr.(*net.UDPAddr)}
	h.round = append(h.round,
		garbage(rng, overQUICBuffer),
		garbage(rng, nearMaxIPv4),
		nil, // empty
		garbage(rng, 1),
		garbage(rng, 100),
		nil,
	)
	h.round = append(h.round, extras...)
	return h
}

// garbage returns n random bytes.
func garbage(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// send sends one round; safe for concurrent use.
func (h *hostile) send(t *testing.T) {
	for _, b := range h.round {
		if _, err := h.c.WriteToUDP(b, h.to); err != nil {
			t.Errorf("hostile send of %d bytes: %v", len(b), err)
			return
		}
		h.sent.Add(1)
	}
}
