//go:build !linux

package tune

import (
	"errors"
	"runtime"
)

// readEthtool: the driver is asked through Linux's ethtool ioctls, which
// this system has not; a variable so tests can stand in for a driver.
var readEthtool = func(iface string) (*Ethtool, error) {
	return nil, errors.New("ethtool: not on " + runtime.GOOS + " (ringtune reads a Linux machine)")
}
