//go:build linux

package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/kvproto"
)

// TestServers: every -impl answers gets with the records' bytes, puts
// with PutOK after their sync, and a bad request with an error reply;
// it exits cleanly on SIGTERM-like cancellation.
func TestServers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kv.dat")
	if _, err := kvproto.PrepareFile(path, 64, nil); err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"ring", "osfile", "std", "sendfile"} {
		t.Run(impl, func(t *testing.T) {
			if impl != "std" && impl != "osfile" && ringpoll.UringStatus() != nil {
				t.Skipf("io_uring unavailable: %v", ringpoll.UringStatus())
			}
			addrc := make(chan net.Addr, 1)
			errc := make(chan error, 1)
			var log strings.Builder
			go func() {
				errc <- run([]string{"-addr", "127.0.0.1:0", "-file", path, "-impl", impl}, func(a net.Addr) { addrc <- a }, &log)
			}()
			var addr net.Addr
			select {
			case addr = <-addrc:
			case err := <-errc:
				if strings.Contains(err.Error(), "invalid argument") {
					t.Skipf("O_DIRECT here: %v", err)
				}
				t.Fatal(err)
			}
			c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			var req []byte
			for i := range uint64(8) {
				req = kvproto.AppendGet(req, i*7)
				req = kvproto.AppendPut(req, i*5)
			}
			req = append(req, 0, 0, 0, 1, 'X') // a bad request, last
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			var buf []byte
			for i := range uint64(8) {
				p, err := kvproto.ReadReply(c, buf)
				if err != nil {
					t.Fatal(err)
				}
				if err := kvproto.Check(i*7, p); err != nil {
					t.Fatalf("get %d: %v", i*7, err)
				}
				p, err = kvproto.ReadReply(c, buf)
				if err != nil || len(p) != 1 || p[0] != kvproto.PutOK {
					t.Fatalf("put %d: reply %q, %v", i*5, p, err)
				}
			}
			p, err := kvproto.ReadReply(c, buf)
			if err != nil || len(p) < 2 || p[0] != 'E' {
				t.Fatalf("a bad request's reply: %q, %v; want an error", p, err)
			}
			c.Close()
			syscall.Kill(os.Getpid(), syscall.SIGTERM)
			select {
			case err := <-errc:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("ringkv did not stop on SIGTERM")
			}
			if !strings.Contains(log.String(), "gets=8 puts=8 errors=1") {
				t.Fatalf("the exit log does not count 8 gets, 8 puts and an error:\n%s", log.String())
			}
		})
	}
}
