package udpreal

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/bench/internal/engines"
	"github.com/ringpoll/ringpoll/bench/internal/quicbench"
)

const alpn = "rp-test"

// quicSizes are the streams each client connection echoes: empty, around
// a packet, and up to 1 MiB.
var quicSizes = []int{0, 1, 1000, 1452, 1453, 4096, 65536, 300_000, 1 << 20}

// quicDatagrams is how many datagrams each client connection echoes.
const quicDatagrams = 20

// TestQUIC serves QUIC with quic-go on a ringpoll PacketConn: a client
// over a std socket echoes streams and datagrams, every byte checked,
// while a hostile sender blasts the server's address. Afterwards the
// same transport must take a new connection, and must not have closed.
func TestQUIC(t *testing.T) {
	engines.ForEach(t, func(t *testing.T, e ringpoll.Engine) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pc := listen(t, e)
		srvTLS, cliTLS := selfSigned(t)
		tr := &quic.Transport{Conn: pc.MessageConn()}
		ln, err := tr.Listen(srvTLS, &quic.Config{EnableDatagrams: true})
		if err != nil {
			t.Fatal(err)
		}
		acceptErr := make(chan error, 1)
		var served sync.WaitGroup
		served.Go(func() { acceptErr <- serveQUICEcho(ln, &served) })
		defer func() {
			// The transport closes its connections and stops reading;
			// the listener, closed first, ends the accept loop.
			ln.Close()
			tr.Close()
			served.Wait()
		}()

		h := newHostile(t, pc.LocalAddr(), quicHostile()...)
		h.send(t) // before the first connection: every run sees them
		stopBlast := startBlast(t, h)
		defer stopBlast()

		// stopped says why the server stopped, if it did.
		stopped := func() error {
			select {
			case err := <-acceptErr:
				return fmt.Errorf("the listener stopped accepting: %w", err)
			default:
				return nil
			}
		}
		start := time.Now()
		if err := echoQUIC(ctx, pc.LocalAddr(), cliTLS, quicSizes, quicDatagrams); err != nil {
			t.Fatal(errors.Join(err, stopped()))
		}
		loaded := time.Since(start)
		stopBlast()

		// One more round, queued ahead of the next connection's first
		// packet: the transport reads past it to take the connection.
		h.send(t)
		if err := echoQUIC(ctx, pc.LocalAddr(), cliTLS, []int{65536}, 1); err != nil {
			t.Fatal(errors.Join(fmt.Errorf("a connection after the blast: %w", err), stopped()))
		}
		if err := stopped(); err != nil {
			t.Fatal(err)
		}
		// quic-go takes its fast path on a PacketConn (an
		// OOBCapablePacketConn: ReadMsgUDP and WriteMsgUDP): it sends its
		// bulk as runs the kernel cuts. Given a MessageConn it reads
		// through its ReadBatch, so its reads and the oversized
		// datagrams cut (MSG_TRUNC) are counted in Stats.
		st := pc.Stats()
		if st.GSOSends == 0 {
			t.Errorf("quic-go sent no message the kernel cut (Stats: %v): it did not take its fast path", st)
		}
		if st.Packets == 0 || st.Truncated == 0 {
			t.Errorf("Stats %v: quic-go's reads did not go through MessageConn.ReadBatch", st)
		}
		t.Logf("%d streams (%d B) and %d datagrams echoed in %v, %d hostile datagrams; server %v",
			len(quicSizes), sum(quicSizes), quicDatagrams, loaded.Round(time.Millisecond), h.sent.Load(), st)
	})
}

// quicHostile are datagrams that look like QUIC to a server: a long
// header of a version nobody speaks (a server answers with Version
// Negotiation), an Initial of version 1 that does not decrypt, and a short
// header for a connection that does not exist.
func quicHostile() [][]byte {
	rng := mrand.New(mrand.NewPCG(46, 2))
	long := func(version uint32) []byte {
		b := garbage(rng, 1200) // an Initial is padded to 1,200 B
		b[0] = 0xc0 | b[0]&0x0f // long header, fixed bit, type Initial
		binary.BigEndian.PutUint32(b[1:], version)
		b[5] = 8  // destination connection ID length
		b[14] = 8 // source connection ID length
		return b
	}
	short := garbage(rng, 60)
	short[0] = 0x40 | short[0]&0x3f
	return [][]byte{long(0x1a2a3a4a), long(1), short}
}

// startBlast sends hostile rounds, one every two milliseconds (enough to
// interleave with the load without filling the server's receive buffer
// with garbage alone), until the function it returns is called; that
// function returns once the sender has stopped, and may be called again.
func startBlast(t *testing.T, h *hostile) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				h.send(t)
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// serveQUICEcho accepts connections until the listener fails, echoing
// every stream and datagram; it returns the listener's error.
func serveQUICEcho(ln *quic.Listener, served *sync.WaitGroup) error {
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return err
		}
		served.Go(func() {
			for {
				d, err := conn.ReceiveDatagram(context.Background())
				if err != nil {
					return
				}
				conn.SendDatagram(d)
			}
		})
		served.Go(func() {
			for {
				s, err := conn.AcceptStream(context.Background())
				if err != nil {
					return
				}
				served.Go(func() {
					io.Copy(s, s)
					s.Close()
				})
			}
		})
	}
}

// echoQUIC connects to addr from a std UDP socket, echoes a stream of each
// size at once and then datagrams one by one, and checks every byte.
func echoQUIC(ctx context.Context, addr net.Addr, tlsConf *tls.Config, sizes []int, datagrams int) error {
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return err
	}
	ct := &quic.Transport{Conn: uc}
	defer func() {
		ct.Close()
		uc.Close()
	}()
	conn, err := ct.Dial(ctx, addr, tlsConf, &quic.Config{EnableDatagrams: true})
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.CloseWithError(0, "done")

	errs := make([]error, len(sizes)+1)
	var wg sync.WaitGroup
	for i, size := range sizes {
		wg.Go(func() {
			if err := echoStream(ctx, conn, i, size); err != nil {
				errs[i] = fmt.Errorf("stream of %d B: %w", size, err)
			}
		})
	}
	wg.Wait()
	errs[len(sizes)] = echoDatagrams(ctx, conn, datagrams)
	return errors.Join(errs...)
}

// echoStream sends size pseudo-random bytes on a new stream, closes its
// sending side, and checks that the same bytes come back.
func echoStream(ctx context.Context, conn *quic.Conn, seed, size int) error {
	s, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	want := garbage(mrand.New(mrand.NewPCG(uint64(seed), uint64(size))), size)
	written := make(chan error, 1)
	go func() {
		_, err := s.Write(want)
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		written <- err
	}()
	got, err := io.ReadAll(s)
	if werr := <-written; werr != nil {
		return fmt.Errorf("write: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("read after %d B: %w", len(got), err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("echo differs: %d B back, first difference at %d", len(got), firstDiff(got, want))
	}
	return nil
}

// echoDatagrams sends n datagrams of varied sizes one at a time and
// checks each echo. A datagram may be lost (that is what they are for):
// one is sent again after a second without its echo, at most three times
// in all.
func echoDatagrams(ctx context.Context, conn *quic.Conn, n int) error {
	rng := mrand.New(mrand.NewPCG(46, 3))
	resends := 0
	for i := range n {
		d := garbage(rng, 8+rng.IntN(1000))
		binary.BigEndian.PutUint64(d, uint64(i)) // tells a late echo from this one's
		for {
			if err := conn.SendDatagram(d); err != nil {
				return fmt.Errorf("datagram %d: %w", i, err)
			}
			got, err := receiveEcho(ctx, conn, uint64(i))
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && resends < 3 {
				resends++
				continue
			}
			if err != nil {
				return fmt.Errorf("datagram %d (%d resent so far): %w", i, resends, err)
			}
			if !bytes.Equal(got, d) {
				return fmt.Errorf("datagram %d: echo of %d B differs at %d", i, len(got), firstDiff(got, d))
			}
			break
		}
	}
	return nil
}

// receiveEcho waits up to a second for the echo of datagram i, skipping
// late echoes of earlier ones.
func receiveEcho(ctx context.Context, conn *quic.Conn, i uint64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	for {
		got, err := conn.ReceiveDatagram(ctx)
		if err != nil {
			return nil, err
		}
		if len(got) >= 8 && binary.BigEndian.Uint64(got) < i {
			continue
		}
		return got, nil
	}
}

// selfSigned makes a server certificate for 127.0.0.1 and localhost
// (quicbench's), and a client configuration that trusts it. Unlike
// quicbench's client, which skips the check, this one verifies the
// certificate: the test covers the whole handshake.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	cert, err := quicbench.Certificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	server = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{alpn}}
	client = &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{alpn}}
	return server, client
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
