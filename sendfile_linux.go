package ringpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// SendFile sends n bytes of f, from offset off, to the connection, after
// every byte written before it and before any written after: the bytes
// go from the page cache to the socket without passing through this
// process. It returns the bytes sent; fewer than n only with an error,
// io.EOF if the file ends first. It blocks while the socket is full,
// bounded by the write deadline, as Write does; bytes in the Writer that
// Flush has not sent yet are not sent before the file.
//
// On every engine it calls sendfile(2) on the calling goroutine, and
// when the socket is full copies a piece of the file through the output
// queue, which the loop sends when room comes; closing the connection or
// the write deadline ends it, and closing f ends it once the socket took
// what was queued.
//
// The bytes sendfile(2) moved, and the pieces copied when the socket was
// full, count in Stats as io.Copy's (ReadFrom's) do: ZeroCopyBytes and
// CopiedBytes.
//
// f may be on any engine. SendFile is safe for concurrent use with the
// Conn's other methods; concurrent writes wait for it. It cannot run in a
// handler inline on the event loop (WithInlineHandler), which it would
// wait for: that fails with an error saying so.
func (c *Conn) SendFile(f *File, off, n int64) (int64, error) {
	switch {
	case f == nil:
		return 0, c.opError("sendfile", errors.New("ringpoll: SendFile of a nil *File"))
	case off < 0 || n < 0:
		return 0, c.opError("sendfile", fmt.Errorf("ringpoll: SendFile(off %d, n %d): %w", off, n, errNegativeCount))
	case c.fd.NoBlock:
		return 0, c.opError("sendfile", errInline)
	}
	if err := c.fd.LockOutput(); err != nil {
		return 0, c.opError("sendfile", err)
	}
	defer c.fd.UnlockOutput()
	sent, err := c.sendfile(f, off, n)
	if err != nil && err != io.EOF && c.fd.Closing() {
		err = net.ErrClosed
	}
	return sent, c.opError("sendfile", err)
}

// copyChunk is how much of the file SendFile copies through the output
// queue when the socket is full.
const copyChunk = 64 << 10

var copyBufs = sync.Pool{New: func() any { return new([copyChunk]byte) }}

// sendfile sends the range with sendfile(2) from this goroutine. When the
// socket is full it copies up to copyChunk bytes through the output
// queue, whose loop waits for room (EPOLLOUT) and sends them, and goes on
// with sendfile once they left: the wait honours the write deadline and
// Close as Write's does, and holds no thread.
func (c *Conn) sendfile(f *File, off, n int64) (int64, error) {
	var sent int64
	for sent < n {
		m, err := f.sendfileTo(c.fd, off+sent, n-sent)
		sent += m
		switch {
		case err == nil && m == 0:
			return sent, io.EOF
		case err == nil:
			c.fd.Touch()
		case err == unix.EAGAIN:
			w, err := c.copyThrough(f, off+sent, min(n-sent, copyChunk))
			c.fd.NoteStall(w)
			sent += w
			if err != nil {
				return sent, err
			}
			if err := c.fd.WaitOutput(); err != nil {
				return sent, err
			}
		default:
			return sent, err
		}
	}
	return sent, nil
}

// copyThrough reads n bytes of f at off and writes them through the output
// queue.
func (c *Conn) copyThrough(f *File, off, n int64) (int64, error) {
	b := copyBufs.Get().(*[copyChunk]byte)
	defer copyBufs.Put(b)
	r, rerr := f.ReadAt(b[:n], off)
	w, err := c.fd.WriteLocked(b[:r])
	if err != nil {
		return int64(w), err
	}
	return int64(w), rerr // io.EOF if the file ended
}

// sendfileTo makes one sendfile(2) call from f at off into sock, of at
// most n bytes, holding f's descriptor and sock's open for it. It returns
// EAGAIN as is when the socket is full.
func (f *File) sendfileTo(sock *poll.FD, off, n int64) (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed.Load() {
		return 0, f.pathError("read", os.ErrClosed)
	}
	var m int
	var err error
	cerr := sock.Control(func(s int) error {
		for {
			o := off
			m, err = unix.Sendfile(s, f.fd, &o, int(min(n, 1<<30)))
			if err != unix.EINTR {
				return nil
			}
		}
	})
	if cerr != nil {
		return 0, cerr
	}
	sock.NoteMove(poll.MoveSendfile, m) // counted as ReadFrom's
	switch {
	case err == unix.EAGAIN:
		return 0, err
	case err != nil:
		return 0, os.NewSyscallError("sendfile", err)
	}
	return int64(m), nil
}
