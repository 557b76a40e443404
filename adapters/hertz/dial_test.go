//go:build linux

package hertz

import (
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/cloudwego/hertz/pkg/app/client"
	"github.com/ringpoll/ringpoll"
)

// TestDialerTLS: Hertz's client reaches an HTTPS server (net/http's) over
// ringpoll connections.
func TestDialerTLS(t *testing.T) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls "+r.Proto)
	}))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // clients closing their pooled connections
	ts.StartTLS()
	defer ts.Close()
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		c := hertzClient(t, opts, client.WithTLSConfig(cfg))
		for range 3 { // a new connection, then kept ones
			code, body, err := hertzDo(c, "GET", ts.URL+"/", nil)
			if err != nil || code != http.StatusOK || string(body) != "tls HTTP/1.1" {
				t.Fatalf("GET %s: %d %q %v", ts.URL, code, body, err)
			}
		}

		d := NewDialer(opts...)
		conn, err := d.DialTimeout("tcp", ts.Listener.Addr().String(), bound, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, ok := conn.(*tls.Conn); !ok {
			t.Fatalf("DialTimeout with TLS returned a %T; want *tls.Conn", conn)
		}
	})
}

// TestDialer: DialConnection returns a *Conn, DialTimeout the ringpoll
// connection; a refused dial fails.
func TestDialer(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		d := NewDialer(opts...)
		c, err := d.DialConnection("tcp", addr, bound, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok := c.(*Conn); !ok {
			t.Fatalf("DialConnection returned a %T; want *Conn", c)
		}
		nc, err := d.DialTimeout("tcp", addr, bound, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, ok := nc.(*ringpoll.Conn); !ok {
			t.Fatalf("DialTimeout returned a %T; want *ringpoll.Conn", nc)
		}
		ln.Close()
		if c, err := d.DialConnection("tcp", addr, bound, nil); err == nil {
			c.Close()
			t.Fatal("DialConnection to a closed port succeeded")
		}
	})
}
