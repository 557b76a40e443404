package ringpoll

import "golang.org/x/sys/unix"

// accept takes one pending connection as a non-blocking, close-on-exec
// socket in a single syscall.
func accept(lfd int) (int, unix.Sockaddr, error) {
	return unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
}
