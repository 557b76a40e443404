//go:build linux

package hertz_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/cloudwego/hertz/pkg/app"
	"github.com/cloudwego/hertz/pkg/app/client"
	"github.com/cloudwego/hertz/pkg/app/server"
	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/adapters/hertz"
)

// A Hertz server and client on ringpoll. The server listens on a
// ringpoll listener handed over with server.WithListener, so its address
// is known before it runs; server.WithHostPorts works as well. Both sides
// take the same ringpoll options, here the engine.
func Example() {
	opts := []ringpoll.Option{ringpoll.WithEngine(ringpoll.EngineEpoll)}
	ln, err := ringpoll.Listen("tcp", "127.0.0.1:0", opts...)
	if err != nil {
		log.Fatal(err)
	}
	h := server.New(
		server.WithListener(ln),
		server.WithTransport(hertz.NewTransporterWith(opts...)),
		server.WithDisablePrintRoute(true),
	)
	h.GET("/hello", func(ctx context.Context, c *app.RequestContext) {
		c.String(http.StatusOK, "hello from ringpoll")
	})
	go h.Run()
	defer h.Shutdown(context.Background())

	c, err := client.NewClient(client.WithDialer(hertz.NewDialer(opts...)))
	if err != nil {
		log.Fatal(err)
	}
	defer c.CloseIdleConnections()
	status, body, err := c.Get(context.Background(), nil, "http://"+ln.Addr().String()+"/hello")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(status, string(body))
	// Output: 200 hello from ringpoll
}
