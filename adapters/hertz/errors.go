package hertz

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"

	errs "github.com/cloudwego/hertz/pkg/common/errors"
	"github.com/cloudwego/hertz/pkg/common/hlog"
)

// normalizeErr turns a ringpoll read error into what Hertz's readers
// compare against with ==: io.EOF (which ringpoll returns bare already)
// and syscall.ECONNRESET, on which Hertz's client retries a request sent
// on a pooled connection the server had reset. Everything else keeps its
// *net.OpError, whose Timeout method Hertz's server asks to answer 408.
func normalizeErr(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	if errors.Is(err, syscall.ECONNRESET) {
		return syscall.ECONNRESET
	}
	return err
}

// ToHertzError maps an error of c to Hertz's: errs.ErrConnectionClosed for
// a closed, reset or shut-down connection, errs.ErrTimeout for a passed
// deadline or timeout; others as they are. Hertz's client calls it
// (network.ErrorNormalization) to tell a lost connection from a failed
// request.
func (c *Conn) ToHertzError(err error) error {
	switch {
	case closedErr(err):
		return errs.ErrConnectionClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return errs.ErrTimeout
	}
	return err
}

// HandleSpecificError reports whether Hertz's server should not log err,
// an error serving the peer at rip: a connection the peer closed or reset
// is the peer's business, not the server's. It logs those at debug level.
func (c *Conn) HandleSpecificError(err error, rip string) (needIgnore bool) {
	if !closedErr(err) {
		return false
	}
	hlog.SystemLogger().Debugf("ringpoll: connection ended: error=%v, remoteAddr=%s", err, rip)
	return true
}

// closedErr reports whether err says the connection is gone: closed here
// (net.ErrClosed), written after the peer or we shut it down (EPIPE, which
// ringpoll.ErrWriteClosed matches), never connected, or reset.
func closedErr(err error) bool {
	return errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ENOTCONN) ||
		errors.Is(err, syscall.ECONNRESET)
}
