//go:build linux

package uringp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestUserErrno: the kernel's restart codes, which a cancelled io-wq
// request may complete with, reach the handlers as -EINTR; every other
// result passes as it is.
func TestUserErrno(t *testing.T) {
	for res := int32(-516); res <= -512; res++ {
		if got := userErrno(res); got != -int32(unix.EINTR) {
			t.Errorf("userErrno(%d) = %d, want -EINTR", res, got)
		}
	}
	for _, res := range []int32{-517, -511, -int32(unix.EINTR), -int32(unix.ECANCELED), 0, 512, 65536} {
		if got := userErrno(res); got != res {
			t.Errorf("userErrno(%d) = %d, want it unchanged", res, got)
		}
	}
}
