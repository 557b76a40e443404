package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/miekg/dns"
	"github.com/ringpoll/ringpoll"
)

// dnsCheckName is the name the dns check asks for; every A query gets
// dnsAddr, as dnsperf's query file asks for names of its own.
const dnsCheckName = "ringbench.example."

// dnsAddr is the address every A query is answered with (TEST-NET-1).
var dnsAddr = netip.AddrFrom4([4]byte{192, 0, 2, 1})

// answerDNS answers an A query with dnsAddr (TTL 60), anything else with
// an empty answer: what an authoritative server does for a zone it holds.
func answerDNS(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	for _, q := range req.Question {
		if q.Qtype == dns.TypeA && q.Qclass == dns.ClassINET {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60},
				A:   dnsAddr.AsSlice(),
			})
		}
	}
	w.WriteMsg(m)
}

// listenDNS makes the socket a dns-* kind serves on: a ringpoll
// PacketConn on the default engine (dns-ringpoll) or on epoll
// (dns-ringpoll-epoll), or a std *net.UDPConn (dns-std). miekg/dns reads
// a *net.UDPConn with ReadMsgUDP and any other PacketConn with ReadFrom.
func listenDNS(kind, addr string) (net.PacketConn, error) {
	switch kind {
	case "dns-ringpoll":
		return ringpoll.ListenPacket("udp", addr)
	case "dns-ringpoll-epoll":
		return ringpoll.ListenPacket("udp", addr, ringpoll.WithEngine(ringpoll.EngineEpoll))
	}
	return net.ListenPacket("udp", addr)
}

// startDNS serves answerDNS with miekg/dns's dns.Server on the kind's
// socket.
func startDNS(cfg config) (*running, error) {
	pc, err := listenDNS(cfg.kind, cfg.addr)
	if err != nil {
		return nil, err
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(answerDNS), NotifyStartedFunc: func() { close(started) }}
	r := &running{addr: pc.LocalAddr().String(), done: make(chan error, 1)}
	served := make(chan error, 1)
	go func() { served <- srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-served:
		pc.Close()
		return nil, err
	}
	stopping := make(chan struct{})
	go func() {
		err := <-served
		select {
		case <-stopping:
		default:
			r.done <- err
		}
	}()
	r.stop = func(ctx context.Context) error {
		close(stopping)
		return srv.ShutdownContext(ctx)
	}
	return r, nil
}

// checkDNS asks the server at addr for dnsCheckName's A record over UDP
// and checks the answer.
func checkDNS(ctx context.Context, addr string) (string, error) {
	m := new(dns.Msg)
	m.SetQuestion(dnsCheckName, dns.TypeA)
	c := &dns.Client{Net: "udp"}
	r, _, err := c.ExchangeContext(ctx, m, addr)
	if err != nil {
		return "", err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return "", fmt.Errorf("answer %s with %d records, want NOERROR with one A record", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok || a.Hdr.Name != dnsCheckName {
		return "", fmt.Errorf("answer %v, want an A record for %s", r.Answer[0], dnsCheckName)
	}
	if got, _ := netip.AddrFromSlice(a.A); got.Unmap() != dnsAddr {
		return "", fmt.Errorf("answer %v, want %v", got, dnsAddr)
	}
	return fmt.Sprintf("%s A %v", dnsCheckName, dnsAddr), nil
}
