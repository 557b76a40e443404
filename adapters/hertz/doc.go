// Package hertz runs the CloudWeGo Hertz HTTP framework
// (github.com/cloudwego/hertz) on ringpoll: a server transport, a client
// dialer and the network.Conn they share.
//
// A server takes the transport through server.WithTransport:
//
//	h := server.New(
//		server.WithHostPorts("127.0.0.1:8080"),
//		server.WithTransport(hertz.NewTransporter),
//	)
//
// or, to choose the engine or other ringpoll options,
// server.WithTransport(hertz.NewTransporterWith(ringpoll.WithEngine(e))).
// A client takes the dialer through client.WithDialer:
//
//	c, err := client.NewClient(client.WithDialer(hertz.NewDialer()))
//
// The transport serves each connection the way Hertz's netpoll transport
// does: a ringpoll Server runs the handler on a pooled goroutine once the
// connection's first bytes arrive, and that call serves the connection's
// requests one after another until Hertz closes it. The Conn's reads and
// writes go straight to ringpoll's nocopy Reader and Writer.
//
// README.md lists the Hertz options the transport honours and those it
// does not, and why.
package hertz
