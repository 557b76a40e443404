//go:build !linux

package ringpoll

import (
	"errors"
	"net"
	"time"
)

// Off Linux no engine runs (engine_other.go), so no socket reaches these:
// they keep the module building, and fail with errors.ErrUnsupported.

func closeSocket(int) {}

func dupSocket(uintptr) (int, error) { return -1, errors.ErrUnsupported }

func setNoDelay(int, bool) error { return errors.ErrUnsupported }

func setKeepAlive(int, bool) error { return errors.ErrUnsupported }

func setKeepAliveIdle(int, time.Duration) error { return errors.ErrUnsupported }

func setKeepAliveConfig(int, net.KeepAliveConfig) error { return errors.ErrUnsupported }

func unackedBytes(int) int { return 0 }

var errAcceptAgain = errors.New("ringpoll: no connection pending")

func acceptSocket(int, string) (int, remote, error) { return -1, remote{}, errors.ErrUnsupported }

func localAddr(int, string) net.Addr { return nil }

func allowedCPUs() func(int) bool { return nil }
