package main

import (
	"fmt"
	"strconv"
	"strings"
)

// engines are the ringpoll engines, by the names ringpoll.ParseEngine takes.
var engines = []string{"epoll", "uring", "uring-hybrid", "uring-reactor", "uring-sqpoll"}

// Server kinds.
const (
	kindStd     = "std"
	kindHandler = "handler" // ringpoll Server
	kindConn    = "conn"    // ringpoll AcceptConn + goroutine
	kindNetpoll = "netpoll"
	kindGnet    = "gnet"
)

// defaultConnBuf is the read buffer a goroutine-per-connection server
// allocates per connection unless the name says otherwise, as ringload's std
// server does.
const defaultConnBuf = 16 << 10

// serverSpec is a parsed server name.
type serverSpec struct {
	name    string // as given, e.g. "ringpoll-uring-conn-4k"
	kind    string // kindStd, kindHandler, ...
	engine  string // ringpoll engine, for kindHandler and kindConn
	bufSize int    // per-connection read buffer, for kindStd and kindConn
}

// parseServer parses a server name: std[-Nk], ringpoll-ENGINE-handler,
// ringpoll-ENGINE-conn[-Nk], netpoll or gnet.
func parseServer(name string) (serverSpec, error) {
	s := serverSpec{name: name, bufSize: defaultConnBuf}
	base := name
	if i := strings.LastIndexByte(name, '-'); i > 0 && strings.HasSuffix(name, "k") {
		if kib, err := strconv.Atoi(name[i+1 : len(name)-1]); err == nil {
			if kib < 1 || kib > 1024 {
				return s, fmt.Errorf("server %q: buffer of %d KiB: want 1 to 1024", name, kib)
			}
			s.bufSize = kib << 10
			base = name[:i]
		}
	}
	sized := base != name
	switch {
	case base == kindStd:
		s.kind = kindStd
		return s, nil
	case base == kindNetpoll || base == kindGnet:
		if sized {
			return s, fmt.Errorf("server %q: %s takes no buffer size", name, base)
		}
		s.kind = base
		return s, nil
	case strings.HasPrefix(base, "ringpoll-"):
		rest := strings.TrimPrefix(base, "ringpoll-")
		i := strings.LastIndexByte(rest, '-')
		if i < 0 {
			break
		}
		s.engine, s.kind = rest[:i], rest[i+1:]
		if !validEngine(s.engine) {
			return s, fmt.Errorf("server %q: unknown engine %q (want one of %s)", name, s.engine, strings.Join(engines, ", "))
		}
		switch s.kind {
		case kindConn:
			return s, nil
		case kindHandler:
			if sized {
				return s, fmt.Errorf("server %q: the handler API takes no buffer size", name)
			}
			return s, nil
		}
	}
	return s, fmt.Errorf("unknown server %q (want std[-Nk], ringpoll-ENGINE-handler, ringpoll-ENGINE-conn[-Nk], netpoll or gnet)", name)
}

// validEngine reports whether e is one of engines.
func validEngine(e string) bool {
	for _, x := range engines {
		if x == e {
			return true
		}
	}
	return false
}

// wantGoroutines is the number of goroutines an idle connection should
// cost the server: one for a goroutine per connection, none for the event
// loop libraries.
func (s serverSpec) wantGoroutines() int {
	if s.kind == kindStd || s.kind == kindConn {
		return 1
	}
	return 0
}
