//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll"
	"github.com/ringpoll/ringpoll/internal/hdr"
)

// udpResult is what -proto udp reports: the datagrams it sent in the
// measurement window.
type udpResult struct {
	Flows    int     `json:"flows"`
	Size     int     `json:"size"`
	GSO      bool    `json:"gso"`
	Offered  float64 `json:"offered_rate"` // -rate; 0: as fast as the sockets take them
	Window   float64 `json:"window_s"`
	Sent     uint64  `json:"sent"`
	SentPPS  float64 `json:"sent_pps"`
	Errors   uint64  `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
}

// udpLoad sends datagrams of size bytes to addr, one way, from flows
// sockets (each its own source port, so a SO_REUSEPORT group's hash can
// spread them), each on a goroutine of its own, 64 per sendmmsg and cut by
// the kernel (GSO) unless gso is off, for warmup and then duration: as
// fast as the sockets take them, or at rate datagrams per second over
// all flows (each flow sends its batches on a fixed schedule; one that
// falls behind catches up by at most one batch, then skips). Each
// datagram starts with its flow number.
//
// Unpaced, a sender using GSO offers tens of millions of small datagrams
// a second: a receiver whose CPU also runs the receive softirqs then
// spends it all in the softirqs dropping them, and reads next to nothing
// (receive livelock). A rate a little above what the server takes
// measures the server instead.
func udpLoad(ctx context.Context, addr string, flows, size int, gso bool, rate float64, warmup, duration time.Duration) (udpResult, error) {
	res := udpResult{Flows: flows, Size: size, GSO: gso, Offered: rate}
	to, err := netip.ParseAddrPort(addr)
	if err != nil {
		return res, fmt.Errorf("-addr %q: %w", addr, err)
	}
	var opts []ringpoll.Option
	if !gso {
		opts = append(opts, ringpoll.WithoutGSO())
	}
	network := "udp4"
	if to.Addr().Is6() {
		network = "udp6"
	}
	var sent, errs atomic.Uint64
	var firstErr atomic.Value
	var measuring atomic.Bool
	stopAt := time.Now().Add(warmup + duration)
	var wg sync.WaitGroup
	for f := range flows {
		c, err := ringpoll.ListenPacket(network, ":0", opts...)
		if err != nil {
			return res, err
		}
		defer c.Close()
		wg.Go(func() {
			out := make([]ringpoll.Packet, 64)
			for i := range out {
				out[i] = ringpoll.Packet{Data: make([]byte, size), Addr: to}
				out[i].Data[0] = byte(f)
			}
			var interval time.Duration
			if rate > 0 {
				interval = time.Duration(float64(len(out)*flows) / rate * float64(time.Second))
			}
			next := time.Now().Add(interval * time.Duration(f) / time.Duration(flows))
			for seq := uint64(0); ctx.Err() == nil; seq++ {
				now := time.Now()
				if now.After(stopAt) {
					return
				}
				if interval > 0 {
					if d := next.Sub(now); d > 0 {
						time.Sleep(d)
					} else if -d > interval {
						next = now // behind by more than a batch: skip
					}
					next = next.Add(interval)
				}
				n, err := c.WriteBatch(out)
				if measuring.Load() {
					sent.Add(uint64(n))
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	measuring.Store(true)
	start := time.Now()
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	}
	measuring.Store(false)
	res.Window = time.Since(start).Seconds()
	wg.Wait()
	res.Sent, res.Errors = sent.Load(), errs.Load()
	res.SentPPS = float64(res.Sent) / res.Window
	if e, ok := firstErr.Load().(string); ok {
		res.FirstErr = e
	}
	return res, ctx.Err()
}

func (r udpResult) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	_, err := fmt.Fprintf(w, "udp: %d flows of %d-byte datagrams (gso=%v, offered %.0f/s, 0: unpaced): sent %d in %.2fs = %.0f/s; errors %d %s\n",
		r.Flows, r.Size, r.GSO, r.Offered, r.Sent, r.Window, r.SentPPS, r.Errors, r.FirstErr)
	return err
}

// udpRRResult is what -proto udp-rr reports.
type udpRRResult struct {
	Clients     int     `json:"conns"`
	Size        int     `json:"size"`
	OfferedRate float64 `json:"offered_rate"`
	Window      float64 `json:"window_s"`
	Requests    uint64  `json:"requests"`
	ReqPerS     float64 `json:"req_per_s"`
	Lost        uint64  `json:"lost"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
	P999us      float64 `json:"p999_us"`
	MaxUs       float64 `json:"max_us"`
	Errors      uint64  `json:"errors"`
	FirstErr    string  `json:"first_error,omitempty"`
}

// udpLost is how long a client waits for a reply before counting its
// request lost.
const udpLost = 200 * time.Millisecond

// udpRR is DNS-like load: clients sockets, each sending a request of size
// bytes and waiting for its echo, at rate requests per second over all of
// them (0: each as fast as replies come). A reply must be the request's
// bytes; one that does not come within udpLost counts as lost. At a rate,
// a pacer sends the requests, evenly spaced (pace.go): client i's at
// its turns, or at once when its reply came after its turn.
//
// With log not nil, every measured request is also written to it after
// the run, one line each: the client's number, the time it was sent (Unix
// nanoseconds) and its latency (nanoseconds), so that when the slow
// requests came can be seen, not only how many there were.
func udpRR(ctx context.Context, addr string, clients, size int, rate float64, warmup, duration time.Duration, log io.Writer) (udpRRResult, error) {
	res := udpRRResult{Clients: clients, Size: size, OfferedRate: rate}
	if size < 16 {
		return res, fmt.Errorf("-size %d: udp-rr needs at least 16 bytes", size)
	}
	r := &rrRun{
		hists: make([]*hdr.Histogram, clients),
		lost:  make([]uint64, clients),
		conns: make([]net.Conn, clients),
		size:  size,
	}
	if log != nil {
		r.logs = make([][]rrSample, clients)
		if rate > 0 {
			// Room for the window's requests, so that logging does not
			// grow slices (and collect garbage) while it measures.
			for i := range r.logs {
				r.logs[i] = make([]rrSample, 0, int(rate*duration.Seconds()/float64(clients)*1.25)+16)
			}
		}
	}
	for id := range clients {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return res, err
		}
		defer c.Close()
		r.conns[id] = c
		r.hists[id] = new(hdr.Histogram)
	}
	var end func()
	if rate > 0 {
		end = r.paced(rate)
	} else {
		end = r.unpaced(ctx, time.Now().Add(warmup+duration))
	}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
	}
	r.measuring.Store(true)
	begin := time.Now()
	select {
	case <-time.After(duration):
	case <-ctx.Done():
	}
	r.measuring.Store(false)
	res.Window = time.Since(begin).Seconds()
	end()
	var all hdr.Histogram
	for i, h := range r.hists {
		all.Merge(h)
		res.Lost += r.lost[i]
	}
	if log != nil {
		if err := writeRRLog(log, r.logs); err != nil {
			return res, err
		}
	}
	res.Requests = all.Count()
	res.ReqPerS = float64(res.Requests) / res.Window
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	res.P50us, res.P99us, res.P999us, res.MaxUs = us(all.Quantile(0.5)), us(all.Quantile(0.99)), us(all.Quantile(0.999)), us(all.Max())
	res.Errors = r.errs.Load()
	if e, ok := r.firstErr.Load().(string); ok {
		res.FirstErr = e
	}
	return res, ctx.Err()
}

// rrRun is one udpRR run: its clients' sockets and what they measured.
// Client id's histogram, log and lost count belong to its goroutine (and,
// paced, the lost count to the pacer) until the run ends.
type rrRun struct {
	conns     []net.Conn
	size      int
	measuring atomic.Bool
	errs      atomic.Uint64
	firstErr  atomic.Value
	hists     []*hdr.Histogram
	logs      [][]rrSample // nil: no log
	lost      []uint64
	wg        sync.WaitGroup
}

func (r *rrRun) fail(err string) {
	r.errs.Add(1)
	r.firstErr.CompareAndSwap(nil, err)
}

// request lays out client id's request number seq in req: the client,
// the number, zeros.
func request(req []byte, id int, seq uint64) {
	clear(req)
	binary.LittleEndian.PutUint64(req, uint64(id))
	binary.LittleEndian.PutUint64(req[8:], seq)
}

// record counts a measured request of client id sent at sent.
func (r *rrRun) record(id int, sent time.Time, took time.Duration) {
	r.hists[id].Record(took)
	if r.logs != nil {
		r.logs[id] = append(r.logs[id], rrSample{sent: sent.UnixNano(), took: took})
	}
}

// unpaced starts the clients sending their requests one after another
// until stopAt or ctx ends, and returns what waits for them to end.
func (r *rrRun) unpaced(ctx context.Context, stopAt time.Time) func() {
	for id, c := range r.conns {
		r.wg.Go(func() {
			req, buf := make([]byte, r.size), make([]byte, r.size+1)
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				sent := time.Now()
				if sent.After(stopAt) {
					return
				}
				request(req, id, seq)
				if _, err := c.Write(req); err != nil {
					r.fail(err.Error())
					time.Sleep(time.Millisecond)
					continue
				}
				c.SetReadDeadline(sent.Add(udpLost))
				for {
					n, err := c.Read(buf)
					if err != nil {
						if r.measuring.Load() {
							r.lost[id]++
						}
						break
					}
					if n == r.size && binary.LittleEndian.Uint64(buf[8:]) < seq {
						continue // a reply that came after its request was counted lost
					}
					if n != r.size || !bytes.Equal(buf[:n], req) {
						r.fail(fmt.Sprintf("client %d: reply of %d bytes does not match request %d", id, n, seq))
						break
					}
					if r.measuring.Load() {
						r.record(id, sent, time.Since(sent))
					}
					break
				}
			}
		})
	}
	return r.wg.Wait
}

// paced starts a pacer sending the clients' requests at rate and a reader
// per client, and returns what stops them. The pacer gives up a request
// still unanswered udpLost after it went, when the client's next turn
// comes.
func (r *rrRun) paced(rate float64) func() {
	slots := make([]*pacedSlot, len(r.conns))
	for id, c := range r.conns {
		req := make([]byte, r.size)
		s := &pacedSlot{state: slotReady, lostAfter: udpLost}
		s.send = func() error {
			request(req, id, s.seq)
			_, err := c.Write(req)
			if err != nil {
				r.fail(err.Error())
			}
			return err
		}
		s.lost = func() {
			if r.measuring.Load() {
				r.lost[id]++
			}
		}
		slots[id] = s
	}
	p := startPacer(slots, rate)
	for id, c := range r.conns {
		s := slots[id]
		r.wg.Go(func() {
			buf, want := make([]byte, r.size+1), make([]byte, r.size)
			for {
				n, err := c.Read(buf)
				if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, net.ErrClosed) {
					return // the run is over
				}
				if err != nil {
					r.fail(err.Error()) // ECONNREFUSED, say, for a request sent
					continue
				}
				if n < 16 {
					r.fail(fmt.Sprintf("client %d: reply of %d bytes", id, n))
					continue
				}
				seq := binary.LittleEndian.Uint64(buf[8:])
				took, ok := s.answered(p, seq, true)
				if !ok {
					continue // a reply after its request was given up
				}
				request(want, id, seq)
				if n != r.size || !bytes.Equal(buf[:n], want) {
					r.fail(fmt.Sprintf("client %d: reply of %d bytes does not match request %d", id, n, seq))
					continue
				}
				if r.measuring.Load() {
					r.record(id, time.Now().Add(-took), took)
				}
			}
		})
	}
	return func() {
		p.end()
		for _, c := range r.conns {
			c.SetReadDeadline(time.Now())
		}
		r.wg.Wait()
	}
}

// rrSample is one measured request of udpRR's log.
type rrSample struct {
	sent int64 // Unix ns
	took time.Duration
}

// writeRRLog writes logs, client by client, as udpRR documents.
func writeRRLog(w io.Writer, logs [][]rrSample) error {
	bw := bufio.NewWriter(w)
	for id, l := range logs {
		for _, x := range l {
			fmt.Fprintln(bw, id, x.sent, int64(x.took))
		}
	}
	return bw.Flush()
}

func (r udpRRResult) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	_, err := fmt.Fprintf(w, "udp-rr: %d clients, %d-byte requests, offered %.0f/s: %d in %.2fs = %.0f/s; p50 %.0fµs p99 %.0fµs p99.9 %.0fµs max %.0fµs; lost %d; errors %d %s\n",
		r.Clients, r.Size, r.OfferedRate, r.Requests, r.Window, r.ReqPerS, r.P50us, r.P99us, r.P999us, r.MaxUs, r.Lost, r.Errors, r.FirstErr)
	return err
}
