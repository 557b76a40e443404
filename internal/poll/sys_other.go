//go:build !linux

package poll

import "errors"

// Off Linux there is no engine: these keep the module building, and every
// call fails with errors.ErrUnsupported.

var errAgain = errors.New("ringpoll: try again")

const (
	shutRead  = 0
	shutWrite = 1
)

func closeFD(int) {}

// Iovecs is scratch space for one sendmsg.
type Iovecs [MaxIov]struct{}

// Sendv returns errors.ErrUnsupported.
func Sendv(int, [][]byte, *Iovecs) (int, error) { return 0, errors.ErrUnsupported }

// Read returns errors.ErrUnsupported.
func Read(int, []byte) (int, error) { return 0, errors.ErrUnsupported }

func resetOnClose(int) {}

// Shutdown returns errors.ErrUnsupported.
func Shutdown(int, int) error { return errors.ErrUnsupported }

// IsAgain reports whether err is the "try again" error.
func IsAgain(err error) bool { return err == errAgain }

// Sendfile returns errors.ErrUnsupported.
func Sendfile(int, int, *int64, int) (int, error) { return 0, errors.ErrUnsupported }

// Splice returns errors.ErrUnsupported.
func Splice(int, int, int) (int, error) { return 0, errors.ErrUnsupported }

// IsUnsupported reports whether err says the call cannot be made at all.
func IsUnsupported(err error) bool { return err == errors.ErrUnsupported }
