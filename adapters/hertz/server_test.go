//go:build linux

package hertz

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/client"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/protocol"
	"github.com/ringpoll/ringpoll"
)

// routes are the handlers most tests use.
func routes(h *server.Hertz) {
	h.GET("/hello", func(ctx context.Context, c *app.RequestContext) {
		c.String(http.StatusOK, "hello world")
	})
	h.POST("/echo", func(ctx context.Context, c *app.RequestContext) {
		c.Data(http.StatusOK, "application/octet-stream", append([]byte(nil), c.Request.Body()...))
	})
	h.GET("/peer", func(ctx context.Context, c *app.RequestContext) {
		c.String(http.StatusOK, c.RemoteAddr().String())
	})
}

// hertzClient returns a Hertz client dialing with ringpoll.
func hertzClient(t *testing.T, opts []ringpoll.Option, copts ...config.ClientOption) *client.Client {
	t.Helper()
	c, err := client.NewClient(append([]config.ClientOption{client.WithDialer(NewDialer(opts...))}, copts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// hertzDo sends one request with the Hertz client and returns the status
// and body.
func hertzDo(c *client.Client, method, url string, body []byte) (int, []byte, error) {
	req, resp := protocol.AcquireRequest(), protocol.AcquireResponse()
	defer protocol.ReleaseRequest(req)
	defer protocol.ReleaseResponse(resp)
	req.SetMethod(method)
	req.SetRequestURI(url)
	if body != nil {
		req.SetBody(body)
	}
	if err := c.Do(context.Background(), req, resp); err != nil {
		return 0, nil, err
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

// httpDo sends one request with a net/http client and returns the status
// and body.
func httpDo(c *http.Client, method, url string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// clients are the two clients every request test runs with.
type doFunc func(method, url string, body []byte) (int, []byte, error)

func forEachClient(t *testing.T, opts []ringpoll.Option, f func(t *testing.T, do doFunc)) {
	t.Run("hertz-client", func(t *testing.T) {
		c := hertzClient(t, opts)
		f(t, func(m, u string, b []byte) (int, []byte, error) { return hertzDo(c, m, u, b) })
	})
	t.Run("net-http-client", func(t *testing.T) {
		c := httpClient(t)
		f(t, func(m, u string, b []byte) (int, []byte, error) { return httpDo(c, m, u, b) })
	})
}

func TestHelloWorld(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		forEachClient(t, opts, func(t *testing.T, do doFunc) {
			code, body, err := do("GET", s.url("/hello"), nil)
			if err != nil || code != http.StatusOK || string(body) != "hello world" {
				t.Fatalf("GET /hello: %d %q %v; want 200 \"hello world\"", code, body, err)
			}
		})
	})
}

func TestEchoOneMiB(t *testing.T) {
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		forEachClient(t, opts, func(t *testing.T, do doFunc) {
			code, body, err := do("POST", s.url("/echo"), payload)
			if err != nil || code != http.StatusOK {
				t.Fatalf("POST /echo: %d %v; want 200", code, err)
			}
			if !bytes.Equal(body, payload) {
				t.Fatalf("POST /echo: got %d bytes back, not the 1 MiB sent", len(body))
			}
		})
	})
}

// TestKeepAlive sends many requests one after another on one connection:
// by hand, and with each client limited to one connection; the server
// must see one peer throughout.
func TestKeepAlive(t *testing.T) {
	const n = 200
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		t.Run("raw", func(t *testing.T) {
			c, r := s.rawConn(t)
			for i := range n {
				fmt.Fprintf(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\nreq %d", len(fmt.Sprint("req ", i)), i)
				resp, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				b, err := io.ReadAll(resp.Body)
				if err != nil || string(b) != fmt.Sprint("req ", i) || resp.Close {
					t.Fatalf("request %d: %q %v, close %v; want %q on a kept connection", i, b, err, resp.Close, fmt.Sprint("req ", i))
				}
			}
		})
		check := func(t *testing.T, do doFunc) {
			peers := map[string]bool{}
			for i := range n {
				code, body, err := do("GET", s.url("/peer"), nil)
				if err != nil || code != http.StatusOK {
					t.Fatalf("request %d: %d %v", i, code, err)
				}
				peers[string(body)] = true
			}
			if len(peers) != 1 {
				t.Fatalf("%d requests came over %d connections; want 1", n, len(peers))
			}
		}
		t.Run("hertz-client", func(t *testing.T) {
			c := hertzClient(t, opts, client.WithMaxConnsPerHost(1))
			check(t, func(m, u string, b []byte) (int, []byte, error) { return hertzDo(c, m, u, b) })
		})
		t.Run("net-http-client", func(t *testing.T) {
			c := httpClient(t)
			c.Transport.(*http.Transport).MaxConnsPerHost = 1
			check(t, func(m, u string, b []byte) (int, []byte, error) { return httpDo(c, m, u, b) })
		})
	})
}

// TestPipelined writes many requests at once on one connection, then
// reads the responses, which must come in order.
func TestPipelined(t *testing.T) {
	const n = 100
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		c, r := s.rawConn(t)
		var reqs strings.Builder
		for i := range n {
			body := fmt.Sprint("pipelined ", i)
			fmt.Fprintf(&reqs, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
		go io.WriteString(c, reqs.String()) // the replies may fill the socket before all is written
		for i := range n {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			b, err := io.ReadAll(resp.Body)
			if want := fmt.Sprint("pipelined ", i); err != nil || string(b) != want {
				t.Fatalf("response %d: %q %v; want %q", i, b, err, want)
			}
		}
	})
}

// TestConcurrent runs 50 goroutines of requests at once, with each client.
func TestConcurrent(t *testing.T) {
	const goroutines, perG = 50, 10
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		forEachClient(t, opts, func(t *testing.T, do doFunc) {
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					for i := range perG {
						want := fmt.Sprintf("g%d-%d-%s", g, i, strings.Repeat("x", g*100))
						code, body, err := do("POST", s.url("/echo"), []byte(want))
						if err != nil || code != http.StatusOK || string(body) != want {
							errs <- fmt.Errorf("goroutine %d request %d: %d %q %v", g, i, code, body, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	})
}

// TestMalformedRequest sends a request Hertz cannot parse: it answers 400
// and closes, and serves the next connection as usual.
func TestMalformedRequest(t *testing.T) {
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes)
		c, r := s.rawConn(t)
		io.WriteString(c, "GARBAGE\r\n\r\n")
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("reading the reply to a malformed request: %v", err)
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("a malformed request got %d; want 400", resp.StatusCode)
		}
		io.Copy(io.Discard, resp.Body)
		if _, err := r.ReadByte(); err != io.EOF {
			t.Fatalf("after the 400 the server should close: read %v; want EOF", err)
		}
		code, body, err := httpDo(httpClient(t), "GET", s.url("/hello"), nil)
		if err != nil || code != http.StatusOK || string(body) != "hello world" {
			t.Fatalf("GET /hello after a malformed request: %d %q %v", code, body, err)
		}
	})
}

// TestBodyAboveHighWater: Hertz peeks a whole body at once, so a body
// larger than ringpoll's input high-water mark (4 MiB) must still arrive.
func TestBodyAboveHighWater(t *testing.T) {
	payload := make([]byte, 9<<20)
	rand.Read(payload)
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, routes, server.WithMaxRequestBodySize(16<<20))
		forEachClient(t, opts, func(t *testing.T, do doFunc) {
			code, body, err := do("POST", s.url("/echo"), payload)
			if err != nil || code != http.StatusOK || !bytes.Equal(body, payload) {
				t.Fatalf("POST /echo of 9 MiB: %d, %d bytes back, %v", code, len(body), err)
			}
		})
	})
}

// TestStreamBody: with server.WithStreamBody the handler reads the body
// from the connection as it arrives, here a chunked one.
func TestStreamBody(t *testing.T) {
	payload := make([]byte, 3<<20)
	rand.Read(payload)
	forEachEngine(t, func(t *testing.T, opts []ringpoll.Option) {
		s := startServer(t, opts, func(h *server.Hertz) {
			h.POST("/stream", func(ctx context.Context, c *app.RequestContext) {
				b, err := io.ReadAll(c.RequestBodyStream())
				if err != nil {
					c.String(http.StatusInternalServerError, err.Error())
					return
				}
				c.Response.Header.Set("X-Chunked", fmt.Sprint(c.Request.Header.ContentLength() < 0))
				c.Data(http.StatusOK, "application/octet-stream", b)
			})
		}, server.WithStreamBody(true))
		// A reader that is not a bytes.Reader: net/http sends it chunked.
		req, err := http.NewRequest("POST", s.url("/stream"), io.MultiReader(bytes.NewReader(payload)))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := httpClient(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(b, payload) {
			t.Fatalf("POST /stream, chunked: %d, %d bytes back, %v", resp.StatusCode, len(b), err)
		}
		if resp.Header.Get("X-Chunked") != "true" {
			t.Fatal("the request reached the server with a length, not chunked: the test tests less than it says")
		}
	})
}
