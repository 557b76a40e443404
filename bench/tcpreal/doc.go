// Package tcpreal holds tests only: real programs written against net's
// TCP (a fasthttp server and its clients) run unmodified on ringpoll
// listeners and connections, on every engine, loaded by their own
// clients while hostile peers (garbage, oversized headers, resets in the
// middle of a body, half-closes, peers that never read or stall) connect
// beside them. fasthttp relies on net's contract where ringpoll
// implements it: the error Accept returns after Close (Serve returns nil
// only for net's "use of closed network connection"), deadlines,
// keep-alive setters and half-closes.
package tcpreal
