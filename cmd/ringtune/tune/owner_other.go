//go:build !unix

package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"runtime"
)

// fileOwner: files have no uid on this system, so revert, which trusts
// only a state file root or the caller owns, cannot run here.
func fileOwner(fs.FileInfo) (int, error) {
	return -1, fmt.Errorf("%w: no file owners on %s", errors.ErrUnsupported, runtime.GOOS)
}
