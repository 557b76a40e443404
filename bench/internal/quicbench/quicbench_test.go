package quicbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// serve starts a Server on a std UDP socket and returns its address; the
// test's cleanup stops it and waits for its goroutines.
func serve(t *testing.T) net.Addr {
	t.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(uc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
	})
	return uc.LocalAddr()
}

// TestAsk: answers of every size come back as the pattern, byte for byte,
// on streams at once on one connection; an ask above MaxAsk is refused.
// dialServer starts a server and dials it; the context bounds the test's
// waits, and both end with the test.
func dialServer(t *testing.T) (context.Context, *quic.Conn) {
	t.Helper()
	addr := serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	conn, err := quic.DialAddr(ctx, addr.String(), ClientTLS(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.CloseWithError(0, "") })
	return ctx, conn
}

func TestAsk(t *testing.T) {
	ctx, conn := dialServer(t)
	sizes := []int64{0, 1, 64, blockSize - 1, blockSize, blockSize + 1, 4 << 20}
	errs := make(chan error, len(sizes))
	for _, n := range sizes {
		go func() {
			got, err := Ask(ctx, conn, n, make([]byte, 1500), true)
			if err == nil && got != n {
				err = fmt.Errorf("%d bytes back", got)
			}
			if err != nil {
				err = fmt.Errorf("ask of %d B: %w", n, err)
			}
			errs <- err
		}()
	}
	for range sizes {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	var se *quic.StreamError
	if _, err := Ask(ctx, conn, MaxAsk+1, make([]byte, 1500), false); !errors.As(err, &se) || se.ErrorCode != CodeRefused {
		t.Errorf("an ask above MaxAsk: %v, want a reset with CodeRefused", err)
	}
}

// TestAskRefusedBeforeClose: a refusal that arrives before the client
// closed its ask (the server's STOP_SENDING fails the Close) is reported
// as the server's reset, as one that arrives later is.
func TestAskRefusedBeforeClose(t *testing.T) {
	ctx, conn := dialServer(t)
	testAsked = func(st *quic.Stream) {
		// The sending side's context ends when the peer's STOP_SENDING
		// arrives.
		select {
		case <-st.Context().Done():
		case <-ctx.Done():
		}
	}
	defer func() { testAsked = nil }()
	var se *quic.StreamError
	if _, err := Ask(ctx, conn, MaxAsk+1, make([]byte, 1500), false); !errors.As(err, &se) || se.ErrorCode != CodeRefused {
		t.Errorf("an ask above MaxAsk, refused before Close: %v, want a reset with CodeRefused", err)
	}
}

// TestMatches: the pattern matches itself at any offset and nothing
// else.
func TestMatches(t *testing.T) {
	b := make([]byte, 3*blockSize)
	for off := int64(0); off < int64(len(b)); {
		p := Pattern(off+5, len(b)-int(off))
		copy(b[off:], p)
		off += int64(len(p))
	}
	if !matches(b, 5) || !matches(b[:0], 0) {
		t.Error("the pattern does not match itself")
	}
	if matches(b, 6) {
		t.Error("the pattern matches at another offset")
	}
	b[2*blockSize] ^= 1
	if matches(b, 5) {
		t.Error("a flipped byte matches")
	}
}
