// Package quicbench is the protocol of ringbench's QUIC scenarios, served
// by frameserve's quic-* kinds and asked by quicload and frameserve -check.
//
// On each stream it opens, the client writes how many bytes it wants, 8
// bytes big-endian, and closes its side of the stream. The server answers
// with that many bytes of the pattern (Pattern: a 64 KiB block of
// pseudo-random bytes, repeated) and closes its side. An ask above MaxAsk
// is refused: the server resets the stream with CodeRefused.
//
// Both sides speak TLS 1.3 with ALPN "ringbench". The server's certificate
// is self-signed, made when it starts (ServerTLS); the client does not
// verify it (ClientTLS): the runs are on loopback, between processes of
// one harness, and the handshake costs the same either way.
package quicbench

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
)

// ALPN is the application protocol both sides offer.
const ALPN = "ringbench"

// MaxAsk is the most bytes one stream may ask for: 1 GiB.
const MaxAsk = 1 << 30

// MaxStreams is how many streams the server lets each connection have
// open at once (quic-go's default is 100).
const MaxStreams = 1000

// Stream error codes the server resets a stream with, and the client
// cancels one with.
const (
	// CodeRefused: the ask was not 8 bytes, or above MaxAsk.
	CodeRefused quic.StreamErrorCode = 1
	// CodeWrong: the answer was not the pattern, or too long.
	CodeWrong quic.StreamErrorCode = 2
)

// blockSize is the length of the pattern's block.
const blockSize = 64 << 10

// block is the pattern's block, the same in every process (seeded).
var block = func() []byte {
	b := make([]byte, blockSize)
	mrand.NewChaCha8([32]byte{'r', 'i', 'n', 'g', 'b', 'e', 'n', 'c', 'h'}).Read(b)
	return b
}()

// Pattern returns the bytes of an answer from offset off on, at most n;
// the slice is shared and must not be written to.
func Pattern(off int64, n int) []byte {
	i := int(off % blockSize)
	return block[i:min(blockSize, i+n)]
}

// ServerTLS returns a server configuration with a new certificate
// (Certificate).
func ServerTLS() (*tls.Config, error) {
	cert, err := Certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{ALPN}}, nil
}

// Certificate returns a new self-signed ECDSA P-256 certificate for
// localhost, 127.0.0.1 and ::1, valid for a day, with its key and its
// Leaf (for a client that verifies it, to trust).
func Certificate() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ringbench"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// ClientTLS returns the client configuration: ALPN, and no verification
// of the server's self-signed certificate.
func ClientTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, ServerName: "localhost", NextProtos: []string{ALPN}}
}

// ServerConfig is the server's QUIC configuration: quic-go's defaults but
// for MaxStreams streams per connection.
func ServerConfig() *quic.Config {
	return &quic.Config{MaxIncomingStreams: MaxStreams}
}

// Server answers the streams of the connections a listener accepts.
type Server struct {
	wg sync.WaitGroup // the goroutines of connections and streams
}

// Serve accepts connections from ln until it fails, and returns its
// error; the connections it accepted are served until they close. Serve
// may be called once.
func (s *Server) Serve(ln *quic.Listener) error {
	for {
		conn, err := ln.Accept(context.Background())
		if err != nil {
			return err
		}
		s.wg.Go(func() {
			for {
				st, err := conn.AcceptStream(context.Background())
				if err != nil {
					return
				}
				s.wg.Go(func() { answer(st) })
			}
		})
	}
}

// Wait waits until every connection Serve accepted has closed and every
// stream is answered, or ctx is done. Call it after Serve has returned
// (a connection's goroutine counts its streams, so none starts unseen).
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answer reads a stream's ask and writes the answer.
func answer(st *quic.Stream) {
	var hdr [8]byte
	if _, err := io.ReadFull(st, hdr[:]); err != nil {
		st.CancelRead(CodeRefused)
		st.CancelWrite(CodeRefused)
		return
	}
	n := binary.BigEndian.Uint64(hdr[:])
	if n > MaxAsk {
		st.CancelRead(CodeRefused)
		st.CancelWrite(CodeRefused)
		return
	}
	for off := int64(0); off < int64(n); {
		b := Pattern(off, int(int64(n)-off))
		if _, err := st.Write(b); err != nil {
			st.CancelRead(CodeRefused)
			return // the client cancelled, or the connection is gone
		}
		off += int64(len(b))
	}
	st.Close()
}

// testAsked, if set, runs in Ask between writing the ask and closing the
// stream's sending side (tests).
var testAsked func(*quic.Stream)

// Ask opens a stream on conn, asks for n bytes and reads the answer into
// buf (of any length above zero), returning how many bytes came. With
// verify it checks every byte against the pattern, else only the length.
// ctx bounds the wait for a stream the server allows; reads end when the
// connection closes.
func Ask(ctx context.Context, conn *quic.Conn, n int64, buf []byte, verify bool) (int64, error) {
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return 0, err
	}
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], uint64(n))
	if _, err := st.Write(hdr[:]); err != nil {
		st.CancelRead(CodeWrong)
		return 0, fmt.Errorf("writing the ask: %w", err)
	}
	if testAsked != nil {
		testAsked(st)
	}
	if err := st.Close(); err != nil {
		// The server may have refused the ask already: its STOP_SENDING
		// fails Close, and the RESET_STREAM it sends with it says why.
		var se *quic.StreamError
		if _, rerr := st.Read(buf); errors.As(rerr, &se) {
			err = rerr
		}
		st.CancelRead(CodeWrong)
		return 0, fmt.Errorf("closing the ask: %w", err)
	}
	var got int64
	for {
		k, err := st.Read(buf)
		if verify && !matches(buf[:k], got) {
			st.CancelRead(CodeWrong)
			return got, fmt.Errorf("the answer differs from the pattern within bytes %d to %d", got, got+int64(k))
		}
		got += int64(k)
		if got > n {
			st.CancelRead(CodeWrong)
			return got, fmt.Errorf("an answer of more than the %d bytes asked", n)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return got, fmt.Errorf("reading the answer after %d of %d bytes: %w", got, n, err)
		}
	}
	if got != n {
		return got, fmt.Errorf("an answer of %d bytes, asked for %d", got, n)
	}
	return got, nil
}

// matches reports whether b is the pattern from offset off on.
func matches(b []byte, off int64) bool {
	for len(b) > 0 {
		p := Pattern(off, len(b))
		if !bytes.Equal(p, b[:len(p)]) {
			return false
		}
		b, off = b[len(p):], off+int64(len(p))
	}
	return true
}
