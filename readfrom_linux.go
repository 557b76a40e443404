package ringpoll

import (
	"io"
	"math"
	"os"
	"syscall"

	"github.com/ringpoll/ringpoll/internal/poll"
	"golang.org/x/sys/unix"
)

// The zero-copy paths of Conn.ReadFrom, after std net's TCPConn.ReadFrom:
// sendfile(2) from a regular file, splice(2) from a stream socket through
// a pipe. internal/poll's FD.SendFrom makes the calls into the socket;
// this file finds the source's descriptor and feeds it.

// zeroCopyFrom sends r with sendfile or splice where r allows. handled is
// false, with nothing read from r, where it does not.
func (c *Conn) zeroCopyFrom(r io.Reader) (written int64, err error, handled bool) {
	remain := int64(math.MaxInt64) // until r's end
	lr, limited := r.(*io.LimitedReader)
	if limited {
		remain, r = lr.N, lr.R
		if remain <= 0 {
			return 0, nil, true
		}
	}
	switch s := r.(type) {
	case *Conn:
		// Its input is in memory already; its WriteTo hands it over.
		return 0, nil, false
	case *io.SectionReader:
		written, err, handled = c.sendSection(s, remain)
	case syscall.Conn:
		written, err, handled = c.zeroCopyConn(s, r, remain)
	default:
		return 0, nil, false
	}
	if limited && handled {
		lr.N -= written
	}
	return written, err, handled
}

// sourceKind is what a source descriptor is, as far as ReadFrom cares.
type sourceKind uint8

const (
	sourceOther  sourceKind = iota
	sourceFile              // sendfile takes it: a regular file or block device
	sourceStream            // a stream socket: splice takes it
)

// kindOf looks at the descriptor behind rc.
func kindOf(rc syscall.RawConn) sourceKind {
	k := sourceOther
	rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil {
			return
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG, unix.S_IFBLK:
			k = sourceFile
		case unix.S_IFSOCK:
			typ, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TYPE)
			if err == nil && typ == unix.SOCK_STREAM {
				k = sourceStream
			}
		}
	})
	return k
}

// zeroCopyConn sends from the descriptor behind s (r is s as a Reader).
func (c *Conn) zeroCopyConn(s syscall.Conn, r io.Reader, remain int64) (int64, error, bool) {
	rc, err := s.SyscallConn()
	if err != nil {
		return 0, nil, false
	}
	switch kindOf(rc) {
	case sourceFile:
		m := &fileMover{rc: rc, r: r}
		return c.sendFile(m, remain)
	case sourceStream:
		return c.spliceFrom(rc, remain)
	}
	return 0, nil, false
}

// sendSection sends from s, an io.SectionReader, if its outer reader is a
// regular file: at the section's position, which it advances.
func (c *Conn) sendSection(s *io.SectionReader, remain int64) (int64, error, bool) {
	outer, base, size := s.Outer()
	sc, ok := outer.(syscall.Conn)
	if !ok {
		return 0, nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil || kindOf(rc) != sourceFile {
		return 0, nil, false
	}
	pos, err := s.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, nil, false
	}
	remain = min(remain, size-pos)
	if remain <= 0 {
		return 0, nil, true
	}
	return c.sendFile(&fileMover{rc: rc, r: s, section: s, base: base}, remain)
}

// sendFile sends up to remain bytes with sendfile from m.
func (c *Conn) sendFile(m *fileMover, remain int64) (int64, error, bool) {
	m.call = m.sendfile
	n, handled, err := c.fd.SendFrom(m, remain, poll.MoveSendfile)
	return n, err, handled
}

// fileMover moves a file's bytes with sendfile: from the file's offset,
// which the kernel advances, or from a section's position.
type fileMover struct {
	rc      syscall.RawConn
	r       io.Reader         // reads the bytes sendfile would send next
	section *io.SectionReader // if set, send from its position
	base    int64             // the section's start in the file

	// The call in progress, in fields, so that call (bound once) does
	// not allocate per call.
	call func(fd uintptr) bool
	sock int
	n    int
	off  int64
	offp *int64
	res  int
	err  error
}

func (m *fileMover) sendfile(fd uintptr) bool {
	m.res, m.err = poll.Sendfile(m.sock, int(fd), m.offp, m.n)
	return true
}

// Move implements poll.Mover. The file's RawConn.Read holds its descriptor
// (and its read lock, as a Read would) for the call.
func (m *fileMover) Move(sock, n int) (int, error) {
	m.sock, m.n, m.offp = sock, n, nil
	if m.section != nil {
		pos, err := m.section.Seek(0, io.SeekCurrent)
		if err != nil {
			return 0, err
		}
		m.off = m.base + pos
		m.offp = &m.off
	}
	if err := m.rc.Read(m.call); err != nil {
		return 0, err
	}
	if m.section != nil && m.res > 0 {
		m.section.Seek(int64(m.res), io.SeekCurrent)
	}
	return m.res, m.err
}

// Read implements poll.Mover.
func (m *fileMover) Read(p []byte) (int, error) { return m.r.Read(p) }

// maxSplice is the most one splice moves into the pipe: the size the pool
// asks for its pipes (poll.PipeSize).
const maxSplice = poll.PipeSize

// spliceFrom sends up to remain bytes from the stream socket behind rc:
// splice into a pipe inside rc.Read (which waits in Go's poller while the
// socket has no input), then out of the pipe into c.
func (c *Conn) spliceFrom(rc syscall.RawConn, remain int64) (written int64, err error, handled bool) {
	p, err := poll.GetPipe()
	if err != nil {
		return 0, nil, false // copy instead, as std net does
	}
	var held int64 // bytes in the pipe: one that still holds some is closed
	defer func() { poll.PutPipe(p, held) }()
	f := &pipeFill{p: p}
	call := f.fill
	for remain > 0 {
		f.max, f.called = int(min(remain, maxSplice)), false
		if err := rc.Read(call); err != nil {
			if !f.called && written == 0 {
				return 0, nil, false // a RawConn that cannot wait: copy
			}
			return written, err, true
		}
		if f.err != nil {
			if poll.IsUnsupported(f.err) && written == 0 {
				return 0, nil, false // not a socket splice reads: copy
			}
			return written, os.NewSyscallError("splice", f.err), true
		}
		if f.n == 0 {
			return written, nil, true // the source's end
		}
		held += int64(f.n)
		n, _, err := c.fd.SendFrom(pipeMover{p}, int64(f.n), poll.MoveSplice)
		held -= n
		written += n
		remain -= n
		if err != nil {
			return written, err, true
		}
	}
	return written, nil, true
}

// pipeFill is one splice from the source socket into an empty pipe, run
// inside the source's RawConn.Read: EAGAIN can then only mean the socket
// has no input, and Read waits for it.
type pipeFill struct {
	p      *poll.Pipe
	max    int
	n      int
	err    error
	called bool
}

func (f *pipeFill) fill(fd uintptr) bool {
	f.called = true
	f.n, f.err = poll.Splice(f.p.W, int(fd), f.max)
	return !poll.IsAgain(f.err)
}

// pipeMover moves what a pipe holds into the socket.
type pipeMover struct{ p *poll.Pipe }

// Move implements poll.Mover.
func (m pipeMover) Move(sock, n int) (int, error) { return poll.Splice(sock, m.p.R, n) }

// Read implements poll.Mover. The pipe holds the bytes being asked for, so
// the non-blocking read finds them.
func (m pipeMover) Read(b []byte) (int, error) { return poll.Read(m.p.R, b) }

// closeIdlePipes closes the process's idle pipes (poll's pool, which
// ReadFrom's splices share); tests call it before they count descriptors.
func closeIdlePipes() { poll.CloseIdlePipes() }
