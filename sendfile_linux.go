package ringpoll

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

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
// when the socket is full waits for room as Write does (the loop watches
// for the kernel's writable mark); closing the connection or the write
// deadline ends the wait, and closing f ends the send at its next call.
//
// The bytes sendfile(2) moved count in Stats as io.Copy's (ReadFrom's)
// do: ZeroCopyBytes.
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
	m := &rangeMover{f: f, off: off}
	sent, _, err := c.fd.SendFrom(m, n, poll.MoveSendfile)
	switch {
	case err != nil && c.fd.Closing():
		err = net.ErrClosed
	case err == nil && sent < n:
		err = io.EOF
	}
	return sent, c.opError("sendfile", err)
}

// rangeMover is SendFile's source for poll.FD.SendFrom: f's bytes from
// off on, moved with sendfile(2) at that offset (f's own position, which
// ReadAt does not use either, stays as it is).
type rangeMover struct {
	f   *File
	off int64
}

// Move implements poll.Mover. It holds f's lock shared for the call, as
// f's requests do, so that Close waits for it.
func (m *rangeMover) Move(sock, n int) (int, error) {
	m.f.mu.RLock()
	defer m.f.mu.RUnlock()
	if m.f.closed.Load() {
		return 0, m.f.pathError("read", os.ErrClosed)
	}
	return poll.Sendfile(sock, m.f.fd, &m.off, n)
}

// Read implements poll.Mover: the bytes Move would have sent next. SendFrom
// reads only on a connection that may not wait, which SendFile refuses.
func (m *rangeMover) Read(p []byte) (int, error) {
	k, err := m.f.ReadAt(p, m.off)
	m.off += int64(k)
	if k > 0 && err == io.EOF {
		err = nil
	}
	return k, err
}
