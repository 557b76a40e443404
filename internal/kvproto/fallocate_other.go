//go:build !linux

package kvproto

import "os"

// fallocate sets f's size where fallocate(2) does not exist.
func fallocate(f *os.File, size int64) error { return f.Truncate(size) }
