//go:build !linux

package ringpoll

import (
	"errors"
	"os"
)

// File is a file read and written through an engine's event loop; it
// needs Linux, and off Linux OpenFile and NewFile fail with an error
// wrapping errors.ErrUnsupported.
type File struct{}

// OpenFile fails off Linux.
func OpenFile(name string, flag int, perm os.FileMode, opts ...Option) (*File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: unsupported(inOpenFile, opts)}
}

// NewFile fails off Linux.
func NewFile(f *os.File, opts ...Option) (*File, error) {
	return nil, &os.PathError{Op: "dup", Path: f.Name(), Err: unsupported(inNewFile, opts)}
}

// Name returns "".
func (f *File) Name() string { return "" }

// ReadAt fails off Linux.
func (f *File) ReadAt(p []byte, off int64) (int, error) { return 0, errors.ErrUnsupported }

// Read fails off Linux.
func (f *File) Read(p []byte) (int, error) { return 0, errors.ErrUnsupported }

// WriteAt fails off Linux.
func (f *File) WriteAt(p []byte, off int64) (int, error) { return 0, errors.ErrUnsupported }

// Sync fails off Linux.
func (f *File) Sync() error { return errors.ErrUnsupported }

// Close fails off Linux.
func (f *File) Close() error { return errors.ErrUnsupported }
