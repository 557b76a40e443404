package hertz

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cloudwego/hertz/pkg/common/config"
	"github.com/cloudwego/hertz/pkg/common/hlog"
	"github.com/cloudwego/hertz/pkg/network"
	"github.com/ringpoll/ringpoll"
)

// Transporter is Hertz's server transport on ringpoll: a network.Transporter
// that listens with ringpoll.Listen and serves with a ringpoll.Server.
// NewTransporter and NewTransporterWith make one for server.WithTransport.
// Its methods are safe for concurrent use.
type Transporter struct {
	opts         []ringpoll.Option
	network      string
	addr         string
	given        net.Listener // Options.Listener
	listenConfig *net.ListenConfig
	readTimeout  time.Duration
	writeTimeout time.Duration
	keepAlive    time.Duration
	sense        bool
	tls          bool // Options.TLS is set: refused
	onAccept     func(conn net.Conn) context.Context
	onConnect    func(ctx context.Context, conn network.Conn) context.Context

	// onListen, if set, hears the listener's address once it listens
	// (tests).
	onListen func(net.Addr)

	// down is set once Shutdown begins; the connections it serves read
	// it too (see Conn.Peek).
	down atomic.Bool

	mu    sync.Mutex
	ln    *ringpoll.Listener
	srv   *ringpoll.Server
	conns map[*Conn]struct{} // served connections
}

var _ network.Transporter = (*Transporter)(nil)

// NewTransporter returns a transport for the Hertz options, with
// ringpoll's default options: pass it to server.WithTransport.
func NewTransporter(options *config.Options) network.Transporter {
	return newTransporter(options, nil)
}

// NewTransporterWith returns a transport constructor for
// server.WithTransport whose transport listens and serves with the given
// ringpoll options (WithEngine, WithLoops, the high-water marks...):
//
//	server.WithTransport(hertz.NewTransporterWith(ringpoll.WithEngine(ringpoll.EngineEpoll)))
//
// They go to ringpoll.Listen (unless Options.Listener gave the listener)
// and NewServer, so they are those Listen takes. WithInlineHandler must
// not be among them: Hertz's server waits for input inside its handler,
// which an event loop must never do.
func NewTransporterWith(opts ...ringpoll.Option) func(*config.Options) network.Transporter {
	opts = append([]ringpoll.Option(nil), opts...)
	return func(options *config.Options) network.Transporter {
		return newTransporter(options, opts)
	}
}

func newTransporter(o *config.Options, opts []ringpoll.Option) *Transporter {
	return &Transporter{
		opts:         opts,
		network:      o.Network,
		addr:         o.Addr,
		given:        o.Listener,
		listenConfig: o.ListenConfig,
		readTimeout:  o.ReadTimeout,
		writeTimeout: o.WriteTimeout,
		keepAlive:    o.KeepAliveTimeout,
		sense:        o.SenseClientDisconnection,
		tls:          o.TLS != nil,
		onAccept:     o.OnAccept,
		onConnect:    o.OnConnect,
		conns:        map[*Conn]struct{}{},
	}
}

// ListenAndServe listens on the options' address (or takes their
// Listener, which must come from ringpoll.Listen) and serves connections
// with onData until Shutdown or Close, when it returns nil.
func (t *Transporter) ListenAndServe(onData network.OnData) error {
	if onData == nil {
		return errors.New("hertz transport: ListenAndServe needs an OnData handler")
	}
	if t.tls {
		// Serving plain text to clients that expect TLS would be worse
		// than not serving.
		return errors.New("hertz transport: server.WithTLS is not supported")
	}
	t.mu.Lock()
	if t.down.Load() {
		t.mu.Unlock()
		return nil
	}
	ln, err := t.listen()
	if err != nil {
		t.mu.Unlock()
		return err
	}
	srv, err := ringpoll.NewServer(t.handler(onData), t.opts...)
	if err != nil {
		t.mu.Unlock()
		ln.Close()
		return fmt.Errorf("hertz transport: %w", err)
	}
	t.ln, t.srv = ln, srv
	t.mu.Unlock()

	hlog.SystemLogger().Infof("HTTP server listening on address=%s (ringpoll, engine %s)", ln.Addr(), ln.Stats().Engine)
	if t.onListen != nil {
		t.onListen(ln.Addr())
	}
	err = srv.Serve(ln)
	// Serve closes ln when Shutdown finds it served, but a Shutdown
	// between the unlock above and Serve finds it not served yet.
	ln.Close()
	if errors.Is(err, ringpoll.ErrServerClosed) {
		return nil
	}
	return err
}

// listen returns the listener to serve: the options' own, or a new one.
// Called with t.mu held.
func (t *Transporter) listen() (*ringpoll.Listener, error) {
	if t.given != nil {
		ln, ok := t.given.(*ringpoll.Listener)
		if !ok {
			return nil, fmt.Errorf("hertz transport: server.WithListener gave a %T, not a *ringpoll.Listener", t.given)
		}
		return ln, nil
	}
	if t.listenConfig != nil && t.listenConfig.Control != nil {
		return nil, errors.New("hertz transport: server.WithListenConfig's Control is not supported")
	}
	network.UnlinkUdsFile(t.network, t.addr) //nolint:errcheck // a stale socket file, if any
	ln, err := ringpoll.Listen(t.network, t.addr, t.opts...)
	if err != nil {
		return nil, fmt.Errorf("hertz transport: %w", err)
	}
	return ln, nil
}

// Listener returns the listener being served, or nil before
// ListenAndServe listens. Hertz's Engine.IsRunning asks for it.
func (t *Transporter) Listener() net.Listener {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ln == nil {
		return nil
	}
	return t.ln
}

// Shutdown stops the transport gracefully: it stops listening, closes the
// connections that wait for their next request, lets the requests being
// served finish (Hertz's server answers them with Connection: close), and
// returns once every connection is closed, or, when ctx ends first,
// closes the rest and returns ctx's error.
func (t *Transporter) Shutdown(ctx context.Context) error {
	t.down.Store(true) // before the look at idle: see Conn.Peek
	t.mu.Lock()
	srv, given := t.srv, t.given
	idle := make([]*Conn, 0, len(t.conns))
	for c := range t.conns {
		idle = append(idle, c)
	}
	t.mu.Unlock()
	for _, c := range idle {
		if c.idle.Load() {
			c.Close()
		}
	}
	if srv == nil {
		// Shut down before it served: a listener handed over is closed
		// as a served one would be.
		if given != nil {
			given.Close()
		}
		return nil
	}
	return srv.Shutdown(ctx)
}

// Close stops the transport at once: it stops listening and closes every
// connection, without waiting for requests being served.
func (t *Transporter) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := t.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// track records a connection being served; it reports false once Shutdown
// began.
func (t *Transporter) track(c *Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.down.Load() {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *Transporter) untrack(c *Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}
