// Package rpcframe is the framing of ringbench's "rpc" scenario, after
// netpoll-benchmark's RPC rules: every message is a 4-byte big-endian
// payload length followed by the payload, and the server answers each
// request with a reply of the same length whose payload is a copy of the
// request's, built in a buffer of its own (never the request's bytes sent
// back as they lie).
package rpcframe

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderLen is the length prefix's size in bytes.
const HeaderLen = 4

// MaxPayload is the largest payload a frame may announce: 16 MiB.
const MaxPayload = 16 << 20

// ErrTooLarge reports a frame announcing more than MaxPayload bytes; the
// connection it came on is out of step and should be closed.
var ErrTooLarge = errors.New("rpcframe: frame announces more than 16 MiB")

// PutHeader writes the length prefix for an n-byte payload into
// h[:HeaderLen].
func PutHeader(h []byte, n int) { binary.BigEndian.PutUint32(h, uint32(n)) }

// PayloadLen decodes the length prefix in h[:HeaderLen].
func PayloadLen(h []byte) (int, error) {
	n := binary.BigEndian.Uint32(h)
	if n > MaxPayload {
		return 0, fmt.Errorf("%w (%d)", ErrTooLarge, n)
	}
	return int(n), nil
}

// Serve answers the frames read from r on w until r ends (it then returns
// nil) or fails, after sending the replies to every whole request it
// read: the reference server's loop for a goroutine per
// connection. Replies are buffered and flushed whenever no more input is
// buffered, so a pipelined batch goes back in one write. bufSize sizes the
// read and write buffers.
func Serve(r io.Reader, w io.Writer, bufSize int) (err error) {
	br := bufio.NewReaderSize(r, bufSize)
	bw := bufio.NewWriterSize(w, bufSize)
	// Every request read gets its reply, even when a bad frame follows.
	defer func() {
		if ferr := bw.Flush(); err == nil {
			err = ferr
		}
	}()
	var hdr [HeaderLen]byte
	var req, resp []byte
	for {
		if br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}

		n, err := PayloadLen(hdr[:])
		if err != nil {
			return err
		}
		if resp == nil || cap(req) < n {
			req = make([]byte, n)
			resp = make([]byte, HeaderLen+n)
		}
		req = req[:n]
		if _, err := io.ReadFull(br, req); err != nil {
			return err
		}
		// The reply, in its own buffer.
		out := resp[:HeaderLen+n]
		PutHeader(out, n)
		copy(out[HeaderLen:], req)
		if _, err := bw.Write(out); err != nil {
			return err
		}
	}
}
