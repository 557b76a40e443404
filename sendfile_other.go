//go:build !linux

package ringpoll

import "errors"

// SendFile fails off Linux, where no File opens.
func (c *Conn) SendFile(f *File, off, n int64) (int64, error) {
	return 0, c.opError("sendfile", errors.ErrUnsupported)
}
