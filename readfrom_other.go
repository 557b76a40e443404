//go:build !linux

package ringpoll

import "io"

// Off Linux there is no zero-copy path (and no engine): ReadFrom copies.
func (c *Conn) zeroCopyFrom(io.Reader) (int64, error, bool) { return 0, nil, false }
