//go:build unix

package tune

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileOwner returns the uid that owns a file (stat(2)'s st_uid).
func fileOwner(fi fs.FileInfo) (int, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, fmt.Errorf("no owner in %T", fi.Sys())
	}
	return int(st.Uid), nil
}
