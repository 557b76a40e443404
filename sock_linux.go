package ringpoll

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/ringpoll/ringpoll/internal/mmsg"
	"golang.org/x/sys/unix"
)

// The socket calls of the public package, Linux side; sock_other.go is the
// twin that keeps the module building elsewhere. Engines do their own I/O
// in internal/poll.

// closeSocket closes a socket that never reached an engine.
func closeSocket(fd int) { unix.Close(fd) }

// dupSocket returns a non-blocking, close-on-exec duplicate of fd, which
// then lives off Go's poller.
func dupSocket(fd uintptr) (int, error) {
	sysfd, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("fcntl", err)
	}
	if err := unix.SetNonblock(sysfd, true); err != nil {
		unix.Close(sysfd)
		return -1, os.NewSyscallError("fcntl", err)
	}
	return sysfd, nil
}

// setNoDelay sets TCP_NODELAY on fd.
func setNoDelay(fd int, on bool) error {
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, boolInt(on)))
}

// boolInt is a boolean socket option's value.
func boolInt(on bool) int {
	if on {
		return 1
	}
	return 0
}

// The keep-alive probes TCP connections start with, net's defaults
// (net.KeepAliveConfig): the first after 15 s idle, then every 15 s, the
// connection dropped after 9 unanswered.
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 15 * time.Second
	keepAliveCount    = 9
)

// setKeepAlive sets SO_KEEPALIVE on fd.
func setKeepAlive(fd int, on bool) error {
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE, boolInt(on)))
}

// setKeepAliveIdle sets how long fd stays idle before its first probe, as
// net's TCPConn.SetKeepAlivePeriod does: 0 is net's default, a negative d
// leaves it, and the kernel counts whole seconds (rounded up).
func setKeepAliveIdle(fd int, d time.Duration) error {
	return setKeepAliveTime(fd, unix.TCP_KEEPIDLE, d, keepAliveIdle)
}

// setKeepAliveConfig applies cfg to fd as net's
// TCPConn.SetKeepAliveConfig does: zero fields take net's defaults,
// negative ones leave the socket's value.
func setKeepAliveConfig(fd int, cfg net.KeepAliveConfig) error {
	if err := setKeepAlive(fd, cfg.Enable); err != nil {
		return err
	}
	if err := setKeepAliveIdle(fd, cfg.Idle); err != nil {
		return err
	}
	if err := setKeepAliveTime(fd, unix.TCP_KEEPINTVL, cfg.Interval, keepAliveInterval); err != nil {
		return err
	}
	n := cfg.Count
	if n == 0 {
		n = keepAliveCount
	}
	if n < 0 {
		return nil
	}
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_KEEPCNT, n))
}

// setKeepAliveTime sets the TCP option opt, a time in seconds, to d
// rounded up (def if d is 0; nothing if it is negative).
func setKeepAliveTime(fd, opt int, d, def time.Duration) error {
	if d == 0 {
		d = def
	}
	if d < 0 {
		return nil
	}
	secs := int((d + time.Second - 1) / time.Second)
	return os.NewSyscallError("setsockopt", unix.SetsockoptInt(fd, unix.IPPROTO_TCP, opt, secs))
}

// tcpClose is the TCP state (tcp_info's tcpi_state) of a connection that
// is over: reset by the peer, or closed on both sides.
const tcpClose = 7

// unackedBytes returns the bytes written to fd that the peer has not
// acknowledged yet (SIOCOUTQ), or 0 if that cannot be read or nobody can
// acknowledge them any more: after a reset the connection is in state
// CLOSE, and SIOCOUTQ still counts what the peer never acknowledged.
func unackedBytes(fd int) int {
	if ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO); err == nil && ti.State == tcpClose {
		return 0
	}
	n, err := unix.IoctlGetInt(fd, unix.SIOCOUTQ)
	if err != nil {
		return 0
	}
	return n
}

// errAcceptAgain is acceptSocket's answer when no connection is pending.
var errAcceptAgain error = unix.EAGAIN

// acceptSocket takes one pending connection on the listening socket lfd
// as a non-blocking, close-on-exec socket, with its peer's address. A
// connection whose peer gave up while queued (ECONNABORTED), and a call a
// signal interrupted, are passed over. It returns errAcceptAgain when none
// is pending.
func acceptSocket(lfd int, network string) (int, remote, error) {
	for {
		fd, peer, err := accept4(lfd, network)
		switch err {
		case nil:
			return fd, peer, nil
		case unix.EINTR, unix.ECONNABORTED:
			continue
		case unix.EAGAIN:
			return -1, remote{}, errAcceptAgain
		}
		return -1, remote{}, os.NewSyscallError("accept4", err)
	}
}

// accept4 accepts a connection on the listening socket lfd. An IP peer's
// address is read into a buffer on the stack and kept as a value:
// unix.Accept4 would leave 144 B of garbage per connection.
func accept4(lfd int, network string) (int, remote, error) {
	if network == "unix" {
		fd, sa, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return -1, remote{}, err
		}
		return fd, unixRemote(sa), nil
	}
	var sa unix.RawSockaddrInet6 // room for either family
	n := uint32(unsafe.Sizeof(sa))
	fd, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(lfd), uintptr(unsafe.Pointer(&sa)), uintptr(unsafe.Pointer(&n)),
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, remote{}, e
	}
	return int(fd), remote{ap: mmsg.DecodeAddr(&sa, n)}, nil
}

// unixRemote is a Unix socket's peer address; a peer without one (an
// unnamed socket, or one gone before getpeername) gets an empty UnixAddr.
// IP peers are read as values instead (accept4).
func unixRemote(sa unix.Sockaddr) remote {
	return remote{addr: sockaddrToAddr(sa, "unix")}
}

// localAddr returns fd's local address, or nil if it cannot be read.
func localAddr(fd int, network string) net.Addr {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return nil
	}
	return sockaddrToAddr(sa, network)
}

// sockaddrToAddr converts an accepted or local socket address.
func sockaddrToAddr(sa unix.Sockaddr, network string) net.Addr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
		if sa.ZoneId != 0 {
			a.Zone = fmt.Sprint(sa.ZoneId)
		}
		return a
	case *unix.SockaddrUnix:
		return &net.UnixAddr{Name: sa.Name, Net: network}
	}
	// Unknown (a peer gone before getpeername): an empty address of the
	// right type rather than nil, which callers would not expect.
	if network == "unix" {
		return &net.UnixAddr{Net: network}
	}
	return &net.TCPAddr{}
}

// allowedCPUs reports which CPUs this process may run on
// (sched_getaffinity), or nil if it cannot tell.
func allowedCPUs() func(int) bool {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	return func(cpu int) bool { return cpu < 1024 && set.IsSet(cpu) }
}

// pinThread locks the calling goroutine to its thread and that thread to
// cpu. The thread keeps the mask: the caller never unlocks it, so the
// runtime ends the thread with the goroutine.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("ringpoll: pinning a thread to CPU %d: %w", cpu, os.NewSyscallError("sched_setaffinity", err))
	}
	return nil
}
