package hertz

import (
	"context"

	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network"
	"github.com/ringpoll/ringpoll"
)

// handler returns the ringpoll handler that serves a connection with
// onData. The Server calls it when the connection's first bytes arrive;
// onData (Hertz's Engine.onData) then serves request after request,
// waiting for each inside the call, and closes the connection before it
// returns. So the handler runs once per connection, and closes the
// connection itself for an onData that would not: the ringpoll Server
// would call it again on new input, for what Hertz treats as a new
// connection.
//
// ringpoll has no accept hook, so what Hertz's netpoll transport does on
// accept (the timeouts, OnAccept, OnConnect) happens here, when the first
// bytes have arrived.
func (t *Transporter) handler(onData network.OnData) ringpoll.Handler {
	return func(ctx context.Context, rc *ringpoll.Conn) error {
		defer rc.Close()
		c := newConn(rc, &t.down)
		if !t.track(c) {
			return nil // shutting down
		}
		defer t.untrack(c)
		c.SetReadTimeout(t.readTimeout)
		c.SetWriteTimeout(t.writeTimeout)
		if err := setKeepAlive(rc, t.keepAlive); err != nil {
			hlog.SystemLogger().Debugf("ringpoll: TCP keep-alive not set: error=%v, remoteAddr=%s", err, rc.RemoteAddr())
		}
		if t.onAccept != nil {
			ctx = t.onAccept(c)
		}
		var hc network.Conn = c
		if t.sense {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			hc = newSenseConn(c, cancel)
		}
		if t.onConnect != nil {
			ctx = t.onConnect(ctx, hc)
		}
		onData(ctx, hc) //nolint:errcheck // Hertz logs its errors itself
		return nil
	}
}
