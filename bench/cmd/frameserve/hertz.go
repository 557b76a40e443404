package main

import (
	"context"
	"net/http"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/server"
	hconfig "github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network"
	"github.com/cloudwego/hertz/pkg/network/netpoll"
	"github.com/cloudwego/hertz/pkg/network/standard"
	"github.com/ringpoll/ringpoll/adapters/hertz"
)

// hertzTransports are the transports the hertz-* kinds run on.
var hertzTransports = map[string]func(*hconfig.Options) network.Transporter{
	"hertz-ringpoll": hertz.NewTransporter,
	"hertz-netpoll":  netpoll.NewTransporter,
	"hertz-std":      standard.NewTransporter,
}

// startHertz runs a Hertz engine (server.New: no middleware) with the
// kind's transport.
func startHertz(cfg config) (*running, error) {
	// Hertz logs each start and stop at info level; errors still show.
	hlog.SetLevel(hlog.LevelWarn)
	// Listen here, so a bad address fails before Run and the port is
	// known. netpoll's and the standard transport take the listener just
	// as the one they would make (net.Listen); the ringpoll transport
	// takes a ringpoll listener on the same engine as its own.
	ln, err := listen(cfg.kind, cfg.addr)
	if err != nil {
		return nil, err
	}
	h := server.New(
		server.WithListener(ln),
		server.WithTransport(hertzTransports[cfg.kind]),
		server.WithDisablePrintRoute(true),
		server.WithExitWaitTime(stopTimeout),
	)
	h.GET("/hello", func(_ context.Context, c *app.RequestContext) {
		c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(helloBody))
	})
	h.GET("/json", func(_ context.Context, c *app.RequestContext) {
		c.JSON(http.StatusOK, theDocument)
	})
	r := &running{addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { r.done <- h.Run() }()
	r.stop = func(ctx context.Context) error { return h.Shutdown(ctx) }
	return r, nil
}
