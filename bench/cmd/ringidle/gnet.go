package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// gnetEcho is a gnet echo server in multicore mode, as in gnet's echo
// example (and peerecho's): OnTraffic writes back everything buffered.
type gnetEcho struct {
	gnet.BuiltinEventEngine
	booted chan error // gets OnBoot's result
	addr   string
}

// startGnet starts gnet.Run on 127.0.0.1:0 in a goroutine and returns the
// bound address once the engine has booted.
func startGnet() (string, error) {
	s := &gnetEcho{booted: make(chan error, 1)}
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(s, "tcp://127.0.0.1:0", gnet.WithMulticore(true), gnet.WithLogger(quietLogger{}))
	}()
	select {
	case err := <-s.booted:
		return s.addr, err
	case err := <-done:
		if err == nil {
			err = errors.New("gnet.Run returned before booting")
		}
		return "", err
	}
}

// OnBoot learns the bound address, which gnet does not expose, from a
// duplicate of the listening socket.
func (s *gnetEcho) OnBoot(eng gnet.Engine) gnet.Action {
	fd, err := eng.Dup()
	if err != nil {
		s.booted <- fmt.Errorf("dup gnet listener: %w", err)
		return gnet.Shutdown
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		s.booted <- os.NewSyscallError("getsockname", err)
		return gnet.Shutdown
	}
	sa4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		s.booted <- fmt.Errorf("gnet listener has unexpected address type %T", sa)
		return gnet.Shutdown
	}
	s.addr = (&net.TCPAddr{IP: net.IP(sa4.Addr[:]), Port: sa4.Port}).String()
	s.booted <- nil
	return gnet.None
}

// OnTraffic writes back everything buffered; Write sends what the socket
// takes and keeps (copies) the rest.
func (s *gnetEcho) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Next(-1)
	_, _ = c.Write(buf)
	return gnet.None
}

// quietLogger drops gnet's log messages but errors, which go to stderr.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any) {}
func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Warnf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ringidle: gnet warning: "+format+"\n", args...)
}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ringidle: gnet error: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "ringidle: gnet fatal: "+format+"\n", args...)
}
