//go:build !linux

package ringpoll

import (
	"errors"
	"fmt"

	"github.com/ringpoll/ringpoll/internal/poll"
)

// Off Linux the module builds, and Listen and Dial fail with an error
// wrapping errors.ErrUnsupported.

func startEngine(k engineKey) (poll.Engine, error) {
	return nil, fmt.Errorf("%w: ringpoll engines need Linux: %w", ErrEngineUnavailable, errors.ErrUnsupported)
}

func uringStatus() error {
	return fmt.Errorf("io_uring needs Linux: %w", errors.ErrUnsupported)
}
