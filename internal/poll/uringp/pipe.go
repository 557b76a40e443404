//go:build linux

package uringp

import "golang.org/x/sys/unix"

// pipeSize is the size a pool pipe asks for (F_SETPIPE_SZ): the most the
// default pipe-max-size lets an unprivileged process have, so a large
// file moves in few chunks. The kernel may give less (the user's pipe
// pages are limited); the pipe's real size is asked back.
const pipeSize = 1 << 20

// maxIdlePipes bounds the pipes a loop keeps for later sends.
const maxIdlePipes = 16

// pipe is one pipe of a loop's pool: r and w are its ends, size its
// capacity in bytes.
type pipe struct {
	r, w int
	size int64
}

// getPipe returns an empty pipe from the loop's pool, or a new one. Loop
// only.
func (l *loop) getPipe() (*pipe, error) {
	if n := len(l.pipes); n > 0 {
		p := l.pipes[n-1]
		l.pipes[n-1] = nil
		l.pipes = l.pipes[:n-1]
		return p, nil
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	p := &pipe{r: fds[0], w: fds[1], size: 1 << 16}
	unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pipeSize) // best effort
	if n, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0); err == nil && n > 0 {
		p.size = int64(n)
	}
	return p, nil
}

// putPipe gives p back to the pool if it is empty (held is the bytes left
// in it), and closes it otherwise: bytes of one send must never reach
// another's socket. Loop only.
func (l *loop) putPipe(p *pipe, held int64) {
	if held == 0 && len(l.pipes) < maxIdlePipes && !l.stopping {
		l.pipes = append(l.pipes, p)
		return
	}
	p.close()
}

func (p *pipe) close() {
	unix.Close(p.r)
	unix.Close(p.w)
}

// closePipes closes the pool's pipes, when the loop ends.
func (l *loop) closePipes() {
	for _, p := range l.pipes {
		p.close()
	}
	l.pipes = nil
}
