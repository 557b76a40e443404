package main

import (
	"context"
	"fmt"
	"net"
	"time"
)

// server is a running peer echo server, whichever library implements it.
// startServer returns one that is already listening; tests start it on
// 127.0.0.1:0, read Addr, and Stop it.
type server interface {
	// Addr is the address the server's listener is bound to.
	Addr() net.Addr
	// Done is closed once the server no longer serves: after Stop, or if the
	// library gave up on its own.
	Done() <-chan struct{}
	// Err tells why serving ended (nil after a normal Stop). Meaningful once
	// Done is closed.
	Err() error
	// Stop closes the listener, gives open connections part of ctx's time to
	// finish what they are doing, then closes them and waits, until ctx ends,
	// for the library's goroutines and the handlers to return. It returns
	// an error only if that did not complete in time. Calling Stop again
	// returns the first call's result.
	Stop(ctx context.Context) error
}

// startServer starts the server cfg describes and returns once it is
// listening.
func startServer(cfg config) (server, error) {
	switch cfg.impl {
	case implNetpoll:
		return startNetpoll(cfg)
	case implGnet:
		if cfg.proto == protoUDP || cfg.proto == protoUDPReply {
			return startGnetUDP(cfg)
		}
		return startGnet(cfg)
	default:
		return nil, fmt.Errorf("unknown -impl %q", cfg.impl)
	}
}

// defaultGrace is the graceful-close budget used when Stop's context has no
// deadline.
const defaultGrace = time.Second

// graceContext returns a context that ends after half of the time left
// before ctx's deadline (or after defaultGrace if ctx has none), or when ctx
// ends. Stop spends that part on the graceful close and keeps the rest for
// closing whatever is left and waiting for it.
func graceContext(ctx context.Context) (context.Context, context.CancelFunc) {
	grace := defaultGrace
	if dl, ok := ctx.Deadline(); ok {
		grace = time.Until(dl) / 2
	}
	return context.WithTimeout(ctx, grace)
}

// graceDuration is graceContext's budget as a duration, for APIs that take a
// timeout rather than a context.
func graceDuration(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl)/2, 0)
	}
	return defaultGrace
}
