package poll

import (
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// PipeSize is the capacity a pool pipe asks for (F_SETPIPE_SZ): the
// default of /proc/sys/fs/pipe-max-size, the most an unprivileged process
// may ask for, so that a large transfer moves in few splices. The kernel
// may give less (the user's pipe quota, pipe(7); newPipe).
const PipeSize = 1 << 20

// maxIdlePipes bounds the empty pipes the process keeps, whatever the
// number of loops and goroutines that splice: an idle pipe still counts
// its whole capacity (256 pages) against the user's pipe quota
// (/proc/sys/fs/pipe-user-pages-soft, 16384 pages by default, pipe(7)),
// which all the user's processes share and past which their new pipes
// get the smallest size and cannot grow. Sixteen keep a quarter of it.
const maxIdlePipes = 16

// Pipe is a pipe for splice(2), borrowed with GetPipe and given back with
// PutPipe: R and W are its read and write ends, both close-on-exec and
// non-blocking.
//
// Conn.ReadFrom reads a pipe with Read, which needs it non-blocking (a
// RawSyscall keeps its P), and its splices pass SPLICE_F_NONBLOCK anyway.
type Pipe struct {
	R, W int
}

// pipePool keeps empty pipes for the next splice, so that one need not
// make a pipe and size it. The process has one, pipes, which Conn.ReadFrom's
// socket splices share. Its methods are safe for concurrent use.
type pipePool struct {
	mu   sync.Mutex
	idle []*Pipe
}

// pipes is the process's pool.
var pipes pipePool

// GetPipe returns an empty pipe, idle or new. It is safe for concurrent
// use.
func GetPipe() (*Pipe, error) { return pipes.get() }

// PutPipe gives p back for the next splice if it is empty (held is the
// bytes left in it) and the pool has room, and closes it otherwise: the
// bytes of one transfer must never reach another's destination. p is not
// to be used after. It is safe for concurrent use.
func PutPipe(p *Pipe, held int64) { pipes.put(p, held) }

// CloseIdlePipes closes the idle pipes; tests call it before they count
// descriptors. It is safe for concurrent use.
func CloseIdlePipes() { pipes.closeIdle() }

func (pp *pipePool) get() (*Pipe, error) {
	pp.mu.Lock()
	if n := len(pp.idle); n > 0 {
		p := pp.idle[n-1]
		pp.idle[n-1] = nil
		pp.idle = pp.idle[:n-1]
		pp.mu.Unlock()
		return p, nil
	}
	pp.mu.Unlock()
	return newPipe()
}

func (pp *pipePool) put(p *Pipe, held int64) {
	if held == 0 {
		pp.mu.Lock()
		if len(pp.idle) < maxIdlePipes {
			pp.idle = append(pp.idle, p)
			pp.mu.Unlock()
			return
		}
		pp.mu.Unlock()
	}
	p.close()
}

func (pp *pipePool) closeIdle() {
	pp.mu.Lock()
	idle := pp.idle
	pp.idle = nil
	pp.mu.Unlock()
	for _, p := range idle {
		p.close()
	}
}

// newPipe makes a pipe and asks for PipeSize. A refused size (over
// pipe-max-size, or the user's quota spent) leaves the default one, which
// only takes more splices.
func newPipe() (*Pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, os.NewSyscallError("pipe2", err)
	}
	p := &Pipe{R: fds[0], W: fds[1]}
	unix.FcntlInt(uintptr(p.W), unix.F_SETPIPE_SZ, PipeSize)
	return p, nil
}

func (p *Pipe) close() {
	unix.Close(p.R)
	unix.Close(p.W)
}
