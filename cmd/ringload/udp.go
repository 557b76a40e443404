//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ringpoll/ringpoll"
)

// udpResult is what -proto udp reports: the datagrams it sent in the
// measurement window.
type udpResult struct {
	Flows    int     `json:"flows"`
	Size     int     `json:"size"`
	GSO      bool    `json:"gso"`
	Window   float64 `json:"window_s"`
	Sent     uint64  `json:"sent"`
	SentPPS  float64 `json:"sent_pps"`
	Errors   uint64  `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
}

// udpLoad sends datagrams of size bytes to addr, one way, from flows
// sockets (each its own source port, so a SO_REUSEPORT group's hash can
// spread them), each on a goroutine of its own, 64 per sendmmsg and cut by
// the kernel (GSO) unless gso is off, as fast as the sockets take them,
// for warmup and then duration. Each datagram starts with its flow and
// sequence number.
func udpLoad(ctx context.Context, addr string, flows, size int, gso bool, warmup, duration time.Duration) (udpResult, error) {
	res := udpResult{Flows: flows, Size: size, GSO: gso}
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
			for seq := uint64(0); ctx.Err() == nil; seq++ {
				if seq%64 == 0 && time.Now().After(stopAt) {
					return
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
	_, err := fmt.Fprintf(w, "udp: %d flows of %d-byte datagrams (gso=%v): sent %d in %.2fs = %.0f/s; errors %d %s\n",
		r.Flows, r.Size, r.GSO, r.Sent, r.Window, r.SentPPS, r.Errors, r.FirstErr)
	return err
}
