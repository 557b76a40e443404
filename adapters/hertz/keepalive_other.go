//go:build !linux

package hertz

import (
	"time"

	"github.com/ringpoll/ringpoll"
)

// setKeepAlive does nothing off Linux, where ringpoll's engines do not run.
func setKeepAlive(*ringpoll.Conn, time.Duration) error { return nil }
