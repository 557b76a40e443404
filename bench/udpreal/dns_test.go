package udpreal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/bench/internal/engines"
)

// The DNS load: dnsClients clients over std sockets, dnsQueries queries in
// all, each answered and checked; each client sends a hostile round every
// dnsHostileEvery queries.
const (
	dnsClients      = 50
	dnsQueries      = 20_000
	dnsHostileEvery = 200
	// dnsMaxRetries bounds the queries sent again after a client timeout
	// (a datagram the kernel dropped), over the whole load of one engine.
	dnsMaxRetries = 20
	// dnsReadTimeout is the server's read deadline (2 s by default),
	// short so that the test soon sees a read time out after the load:
	// the server must read on after it.
	dnsReadTimeout = 20 * time.Millisecond
)

// TestDNS serves DNS with miekg/dns on a ringpoll PacketConn: 50 clients
// over std sockets make 20,000 A queries, every answer checked, while
// datagrams longer than the server's 512-byte buffer, 64 KB of garbage
// and empty ones arrive among them. The server must still answer at the
// end, after its reads have timed out.
func TestDNS(t *testing.T) {
	engines.ForEach(t, func(t *testing.T, e ringpoll.Engine) {
		pc := listen(t, e)
		if err := pc.SetReadBuffer(4 << 20); err != nil {
			t.Fatal(err)
		}
		watch := &readWatch{timedOut: make(chan struct{}, 1)}
		started := make(chan struct{})
		srv := &dns.Server{
			PacketConn:        pc,
			Handler:           dns.HandlerFunc(answerA),
			ReadTimeout:       dnsReadTimeout,
			NotifyStartedFunc: func() { close(started) },
			DecorateReader:    watch.decorate,
		}
		var serveErr error
		served := make(chan struct{}) // closed when ActivateAndServe returned serveErr
		go func() {
			defer close(served)
			serveErr = srv.ActivateAndServe()
		}()
		select {
		case <-started:
		case <-served:
			t.Fatalf("the server did not start: %v", serveErr)
		}
		defer func() {
			select {
			case <-served:
				return // reported already
			default:
			}
			if err := srv.Shutdown(); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if <-served; serveErr != nil {
				t.Errorf("ActivateAndServe returned %v after Shutdown, want nil", serveErr)
			}
		}()

		addr := pc.LocalAddr().String()
		h := newHostile(t, pc.LocalAddr(), dnsHostile(t)...)
		h.send(t) // before the first query: every run sees them
		start := time.Now()
		var retries atomic.Int64
		errs := make([]error, dnsClients)
		var wg sync.WaitGroup
		for c := range dnsClients {
			wg.Go(func() { errs[c] = queryLoad(addr, c, h, t, &retries) })
		}
		wg.Wait()
		loaded := time.Since(start)
		select {
		case <-served:
			t.Fatalf("the server stopped serving: %v", serveErr)
		default:
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		if n := retries.Load(); n > dnsMaxRetries {
			t.Errorf("%d queries were sent again after a timeout, want at most %d", n, dnsMaxRetries)
		}

		// Still serving, after a read that timed out with no query
		// waiting: drain the signals of the load, wait for a fresh one.
		select {
		case <-watch.timedOut:
		default:
		}
		select {
		case <-watch.timedOut:
		case <-served:
			t.Fatalf("the server stopped: %v", serveErr)
		case <-time.After(5 * time.Second):
			t.Fatalf("the server's read did not time out in 5 s (ReadTimeout %v)", dnsReadTimeout)
		}
		var noRetries atomic.Int64
		if err := query(&dns.Client{Timeout: 2 * time.Second}, nil, addr, 1<<20, &noRetries); err != nil {
			t.Fatalf("after the load: %v", err)
		}
		select {
		case <-served:
			t.Fatalf("the server stopped: %v", serveErr)
		default:
		}
		st := pc.Stats()
		if st.Truncated == 0 {
			t.Errorf("no datagram was cut short (Stats: %v): the test did not do what it says", st)
		}
		t.Logf("%d queries from %d clients in %v (%.0f/s), %d sent again, %d hostile datagrams, %d read timeouts; server %v",
			dnsQueries, dnsClients, loaded.Round(time.Millisecond), dnsQueries/loaded.Seconds(),
			retries.Load(), h.sent.Load(), watch.timeouts.Load(), st)
	})
}

// answerA answers an A query for hN.example. with the address dnsAnswer(N),
// and anything else with NXDOMAIN.
func answerA(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	var n uint32
	if len(req.Question) != 1 || req.Question[0].Qtype != dns.TypeA {
		m.SetRcode(req, dns.RcodeNameError)
	} else if _, err := fmt.Sscanf(req.Question[0].Name, "h%d.example.", &n); err != nil {
		m.SetRcode(req, dns.RcodeNameError)
	} else {
		m.Answer = append(m.Answer, &dns.A{
			Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
			A:   dnsAnswer(n).AsSlice(),
		})
	}
	w.WriteMsg(m)
}

// dnsAnswer is the address of hN.example.: 10.x.y.z, N's low 24 bits.
func dnsAnswer(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)})
}

// queryLoad is client c's share of the load, on one socket of its own;
// it sends a hostile round every dnsHostileEvery queries.
func queryLoad(addr string, c int, h *hostile, t *testing.T, retries *atomic.Int64) error {
	cl := &dns.Client{Timeout: time.Second}
	co, err := cl.Dial(addr)
	if err != nil {
		return err
	}
	defer co.Close()
	per := dnsQueries / dnsClients
	for i := range per {
		if i%dnsHostileEvery == dnsHostileEvery/2 {
			h.send(t)
		}
		if err := query(cl, co, addr, uint32(c*per+i), retries); err != nil {
			return fmt.Errorf("client %d: %w", c, err)
		}
	}
	return nil
}

// query asks for hN.example. on co (a socket of its own if nil) and checks
// the answer; a query that times out is sent again, up to three times.
func query(cl *dns.Client, co *dns.Conn, addr string, n uint32, retries *atomic.Int64) error {
	m := new(dns.Msg)
	m.SetQuestion(fmt.Sprintf("h%d.example.", n), dns.TypeA)
	for attempt := 0; ; attempt++ {
		var r *dns.Msg
		var err error
		if co != nil {
			r, _, err = cl.ExchangeWithConn(m, co)
		} else {
			r, _, err = cl.Exchange(m, addr)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && attempt < 3 {
			retries.Add(1)
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m.Question[0].Name, err)
		}
		return checkAnswer(m, r, dnsAnswer(n))
	}
}

// checkAnswer checks that r answers m with want, and only that.
func checkAnswer(m, r *dns.Msg, want netip.Addr) error {
	name := m.Question[0].Name
	if r.Id != m.Id || r.Rcode != dns.RcodeSuccess || len(r.Question) != 1 || r.Question[0] != m.Question[0] {
		return fmt.Errorf("%s: reply id %d (sent %d), rcode %s, question %v", name, r.Id, m.Id, dns.RcodeToString[r.Rcode], r.Question)
	}
	if len(r.Answer) != 1 {
		return fmt.Errorf("%s: %d answers, want 1: %v", name, len(r.Answer), r.Answer)
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok || a.Hdr.Name != name {
		return fmt.Errorf("%s: answer %v", name, r.Answer[0])
	}
	if got, _ := netip.AddrFromSlice(a.A); got.Unmap() != want {
		return fmt.Errorf("%s: answer %v, want %v", name, a.A, want)
	}
	return nil
}

// dnsHostile are datagrams longer than the server's 512-byte buffer that
// start as a query: one padded with EDNS0 padding (RFC 7830) to over 600
// bytes, and one followed by garbage to 700 bytes.
func dnsHostile(t *testing.T) [][]byte {
	padded := new(dns.Msg)
	padded.SetQuestion("h1.example.", dns.TypeA)
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(4096)
	opt.Option = append(opt.Option, &dns.EDNS0_PADDING{Padding: make([]byte, 600)})
	padded.Extra = append(padded.Extra, opt)
	p, err := padded.Pack()
	if err != nil {
		t.Fatal(err)
	}
	trailing := new(dns.Msg)
	trailing.SetQuestion("h2.example.", dns.TypeA)
	q, err := trailing.Pack()
	if err != nil {
		t.Fatal(err)
	}
	q = append(q, garbage(rand.New(rand.NewPCG(46, 4)), 700-len(q))...)
	return [][]byte{p, q}
}

// readWatch looks at what the server's reads return, through miekg/dns's
// DecorateReader hook, and changes nothing: it counts reads that timed
// out, and signals the latest.
type readWatch struct {
	dns.PacketConnReader
	timeouts atomic.Int64
	timedOut chan struct{} // a token after a read that timed out
}

func (w *readWatch) decorate(r dns.Reader) dns.Reader {
	w.PacketConnReader = r.(dns.PacketConnReader)
	return w
}

func (w *readWatch) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	m, addr, err := w.PacketConnReader.ReadPacketConn(conn, timeout)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		w.timeouts.Add(1)
		select {
		case w.timedOut <- struct{}{}:
		default:
		}
	}
	return m, addr, err
}
