package ringpoll

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sfFile writes size bytes of lowercase letters to a new file and opens
// it for engine e; the bytes are returned too.
func sfFile(t *testing.T, e Engine, size int) (*File, []byte) {
	t.Helper()
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(size), 3))
	for i := range want {
		want[i] = 'a' + byte(rng.IntN(26))
	}
	name := filepath.Join(t.TempDir(), "sendfile")
	if err := os.WriteFile(name, want, 0o600); err != nil {
		t.Fatal(err)
	}
	return fileOpen(t, e, name, os.O_RDONLY), want
}

// sfSmallBuffers shrinks the socket buffers of both ends, so that a send
// of a few MiB meets a full socket (EAGAIN) many times.
func sfSmallBuffers(t *testing.T, c *Conn, peer net.Conn) {
	t.Helper()
	if err := c.fd.Control(func(s int) error { return unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_SNDBUF, 16<<10) }); err != nil {
		t.Fatal(err)
	}
	sfPeerControl(t, peer, func(s int) { unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_RCVBUF, 16<<10) })
}

// sfPeerControl runs f on the peer's socket.
func sfPeerControl(t *testing.T, peer net.Conn, f func(s int)) {
	t.Helper()
	rc, err := peer.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(s uintptr) { f(int(s)) }); err != nil {
		t.Fatal(err)
	}
}

// sfPeerQueued returns the bytes waiting in the peer's receive queue.
func sfPeerQueued(t *testing.T, peer net.Conn) int {
	n := 0
	sfPeerControl(t, peer, func(s int) { n, _ = unix.IoctlGetInt(s, unix.SIOCINQ) })
	return n
}

// TestConnSendFile: a file range goes to the peer byte for byte, after
// what was written before it and before what is written after, while
// other goroutines write meanwhile (their bytes never land inside the
// range); ranges that start off a page boundary and meet a full socket
// many times arrive whole; a range past the end sends what there is and
// returns io.EOF.
func TestConnSendFile(t *testing.T) {
	cases := []struct {
		name     string
		network  string
		size     int
		off, n   int64
		small    bool // small socket buffers: the socket fills many times
		racers   int  // goroutines writing "X" meanwhile
		wantEOF  bool
		wantSent int64
	}{
		{name: "small", network: "tcp", size: 1000, off: 5, n: 100, wantSent: 100},
		{name: "zero", network: "tcp", size: 1000, off: 5, n: 0, wantSent: 0},
		{name: "big-unaligned", network: "tcp", size: 3<<20 + 777, off: 1001, n: 3<<20 - 300, small: true, wantSent: 3<<20 - 300},
		{name: "racing-writers", network: "tcp", size: 2 << 20, off: 0, n: 2 << 20, small: true, racers: 4, wantSent: 2 << 20},
		{name: "past-eof", network: "tcp", size: 1000, off: 900, n: 500, wantEOF: true, wantSent: 100},
		{name: "at-eof", network: "tcp", size: 1000, off: 1000, n: 10, wantEOF: true, wantSent: 0},
		{name: "unix", network: "unix", size: 1<<20 + 5, off: 3, n: 1 << 20, wantSent: 1 << 20},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				f, data := sfFile(t, e, tc.size)
				c, peer := tsPair(t, e, tc.network, tsDialed)
				if tc.small {
					sfSmallBuffers(t, c, peer)
				}
				got := make(chan []byte, 1)
				go func() {
					b, _ := io.ReadAll(peer)
					got <- b
				}()
				if _, err := c.Write([]byte("HEAD")); err != nil {
					t.Fatal(err)
				}
				start := make(chan struct{})
				var wg sync.WaitGroup
				for range tc.racers {
					wg.Go(func() {
						<-start
						for range 50 {
							if _, err := c.Write([]byte("XX")); err != nil {
								return
							}
						}
					})
				}
				close(start)
				sent, err := c.SendFile(f, tc.off, tc.n)
				if tc.wantEOF && err != io.EOF || !tc.wantEOF && err != nil || sent != tc.wantSent {
					t.Fatalf("SendFile(off %d, n %d) = %d, %v; want %d, EOF %v", tc.off, tc.n, sent, err, tc.wantSent, tc.wantEOF)
				}
				wg.Wait()
				if _, err := c.Write([]byte("TAIL")); err != nil {
					t.Fatal(err)
				}
				c.Close()
				b := tsRecv(t, got, "the peer's bytes")
				want := data[tc.off:][:tc.wantSent]
				if !bytes.HasPrefix(b, []byte("HEAD")) || !bytes.HasSuffix(b, []byte("TAIL")) {
					t.Fatalf("the stream does not start with HEAD and end with TAIL (%d bytes)", len(b))
				}
				body := b[4 : len(b)-4]
				i := bytes.IndexFunc(body, func(r rune) bool { return r != 'X' })
				if i < 0 {
					i = len(body)
				}
				if !bytes.HasPrefix(body[i:], want) {
					t.Fatalf("the file's bytes are not in one piece after %d X bytes", i)
				}
				if rest := body[i+len(want):]; strings.Trim(string(rest), "X") != "" || len(body)-len(want) != 100*tc.racers {
					t.Fatalf("%d bytes besides the file's, not all X, want %d", len(body)-len(want), 100*tc.racers)
				}
			})
		}
	})
}

// TestConnSendFileCounted: SendFile's sendfile(2) calls count in the
// loop's counters as io.Copy's from a file (ReadFrom) do: calls in
// Sendfiles, every byte of the range in SendfileBytes, none copied where
// the small socket buffers were full (SendCopied): the send waits for
// room instead.
func TestConnSendFileCounted(t *testing.T) {
	const size = 2 << 20
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, how := range []string{"SendFile", "io.Copy"} {
			t.Run(how, func(t *testing.T) {
				f, data := sfFile(t, e, size)
				c, peer := tsPair(t, e, "tcp", tsDialed)
				sfSmallBuffers(t, c, peer)
				got := make(chan []byte, 1)
				go func() {
					b, _ := io.ReadAll(peer)
					got <- b
				}()
				before := rfCount(c)
				var sent int64
				var err error
				if how == "SendFile" {
					sent, err = c.SendFile(f, 0, size)
				} else {
					sent, err = io.Copy(c, rfFile(t, data))
				}
				if sent != size || err != nil {
					t.Fatalf("%s = %d, %v; want %d, nil", how, sent, err, size)
				}
				d := rfCount(c).sub(before)
				c.Close()
				if b := tsRecv(t, got, "the peer's bytes"); !bytes.Equal(b, data) {
					t.Fatalf("the peer got %d bytes, not the file's %d", len(b), size)
				}
				t.Logf("%v", d)
				if d.sendfiles == 0 || d.sendfileBytes != size || d.copied != 0 {
					t.Errorf("counted %v; want %d bytes by sendfile, none copied", d, size)
				}
			})
		}
	})
}

// TestConnSendFileStops: a send that waits for a peer that does not read
// ends when the connection closes, when the file closes or when the
// write deadline passes, with the matching error and fewer bytes than
// asked. The file's Close ends it at its next call, once the socket has
// room.
func TestConnSendFileStops(t *testing.T) {
	cases := []struct {
		name string
		stop func(c *Conn, f *File) error
		want error
	}{
		{"conn-close", func(c *Conn, f *File) error { return c.Close() }, net.ErrClosed},
		{"file-close", func(c *Conn, f *File) error { return f.Close() }, os.ErrClosed},
		{"deadline", func(c *Conn, f *File) error { return c.SetWriteDeadline(time.Now()) }, os.ErrDeadlineExceeded},
	}
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				sfStop(t, e, tc.stop, tc.want, tc.name)
			})
		}
	})
}

// sfStop is one case of TestConnSendFileStops.
func sfStop(t *testing.T, e Engine, stop func(c *Conn, f *File) error, want error, name string) {
	const size = 8 << 20
	f, _ := sfFile(t, e, size)
	c, peer := tsPair(t, e, "tcp", tsDialed)
	sfSmallBuffers(t, c, peer)
	type result struct {
		n   int64
		err error
	}
	res := make(chan result, 1)
	go func() {
		n, err := c.SendFile(f, 0, size)
		res <- result{n, err}
	}()
	tsEventually(t, "the first bytes at the peer", func() bool { return sfPeerQueued(t, peer) > 0 })
	if err := stop(c, f); err != nil {
		t.Fatal(err)
	}
	// SendFile waits for room, which the file's Close does not end: the
	// peer reads.
	drained := make(chan struct{})
	go func() {
		io.Copy(io.Discard, peer)
		close(drained)
	}()
	r := tsRecv(t, res, "the stopped SendFile")
	if !errors.Is(r.err, want) || r.n >= size {
		t.Fatalf("SendFile after %s = %d, %v; want fewer than %d bytes and %v", name, r.n, r.err, size, want)
	}
	var op *net.OpError
	if !errors.As(r.err, &op) || op.Op != "sendfile" {
		t.Fatalf("error %v: want a *net.OpError for sendfile", r.err)
	}
	c.Close()
	peer.Close()
	<-drained
}

// TestConnSendFileBadInput: a nil file, negative offsets and counts, a
// closed file and a closed connection fail with clear errors; a handler
// running inline on the loop gets errInline.
func TestConnSendFileBadInput(t *testing.T) {
	forEachEngine(t, func(t *testing.T, e Engine) {
		f, _ := sfFile(t, e, 100)
		c, _ := tsPair(t, e, "tcp", tsDialed)
		if _, err := c.SendFile(nil, 0, 1); err == nil {
			t.Fatal("SendFile of a nil file succeeded")
		}
		if _, err := c.SendFile(f, -1, 1); !errors.Is(err, errNegativeCount) {
			t.Fatalf("SendFile at -1: %v, want errNegativeCount", err)
		}
		if _, err := c.SendFile(f, 0, -1); !errors.Is(err, errNegativeCount) {
			t.Fatalf("SendFile of -1 bytes: %v, want errNegativeCount", err)
		}
		g, _ := sfFile(t, e, 100)
		g.Close()
		if _, err := c.SendFile(g, 0, 10); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("SendFile of a closed file: %v, want os.ErrClosed", err)
		}
		c.Close()
		if _, err := c.SendFile(f, 0, 10); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("SendFile on a closed connection: %v, want net.ErrClosed", err)
		}

		ln := listen(t, e, "tcp")
		errs := make(chan error, 1)
		startServer(t, ln, func(ctx context.Context, c *Conn) error {
			c.Reader().Release()
			_, err := c.SendFile(f, 0, 10)
			select {
			case errs <- err:
			default:
			}
			return err
		}, WithInlineHandler())
		peer := tsDialStd(t, "tcp", ln.Addr().String())
		peer.Write([]byte("go"))
		if err := tsRecv(t, errs, "the inline handler's SendFile"); !errors.Is(err, errInline) {
			t.Fatalf("SendFile in an inline handler: %v, want errInline", err)
		}
	})
}
