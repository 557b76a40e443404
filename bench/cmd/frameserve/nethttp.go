package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"

	"github.com/ringpoll/ringpoll"
)

// listen makes the listener a kind serves on: ringpoll's default engine
// for *-ringpoll, its epoll engine for *-ringpoll-epoll, std net for the
// rest (Hertz's netpoll transport takes a net.Listener too).
func listen(kind, addr string) (net.Listener, error) {
	switch kind {
	case "hertz-ringpoll", "http-ringpoll", "grpc-ringpoll":
		return ringpoll.Listen("tcp", addr)
	case "http-ringpoll-epoll", "grpc-ringpoll-epoll":
		return ringpoll.Listen("tcp", addr, ringpoll.WithEngine(ringpoll.EngineEpoll))
	}
	return net.Listen("tcp", addr)
}

// httpHandler answers /hello, /json and, if file is set, /file.
func httpHandler(file string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(helloBody))
	})
	mux.HandleFunc("GET /json", func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(theDocument)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	if file != "" {
		mux.HandleFunc("GET /file", func(w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, file)
		})
	}
	return mux
}

// startHTTP runs an http.Server on the kind's listener.
func startHTTP(cfg config) (*running, error) {
	ln, err := listen(cfg.kind, cfg.addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: httpHandler(cfg.file)}
	if cfg.h2c {
		// HTTP/2 without TLS, with prior knowledge, beside HTTP/1.1.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	r := &running{addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			r.done <- err
		}
	}()
	r.stop = func(ctx context.Context) error {
		if err := srv.Shutdown(ctx); err != nil {
			// Connections still busy (h2c ones are hijacked, so Shutdown
			// does not see them) are cut off.
			return errors.Join(err, srv.Close())
		}
		return nil
	}
	return r, nil
}
