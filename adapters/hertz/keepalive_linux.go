package hertz

import (
	"net"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll"
)

// setKeepAlive turns on TCP keep-alive probes on rc, the first after d of
// silence and then every d, as Hertz's netpoll transport does with its
// KeepAliveTimeout. Unix sockets have none.
func setKeepAlive(rc *ringpoll.Conn, d time.Duration) error {
	if _, ok := rc.LocalAddr().(*net.TCPAddr); !ok || d <= 0 {
		return nil
	}
	secs := int(max((d+time.Second-1)/time.Second, 1))
	raw, err := rc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		s := int(fd)
		if serr = syscall.SetsockoptInt(s, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE, 1); serr != nil {
			return
		}
		if serr = syscall.SetsockoptInt(s, syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE, secs); serr != nil {
			return
		}
		serr = syscall.SetsockoptInt(s, syscall.IPPROTO_TCP, syscall.TCP_KEEPINTVL, secs)
	})
	if err != nil {
		return err
	}
	return serr
}
