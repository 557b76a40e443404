package tune

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Change is one file a plan writes, relative to the root, with the value
// it held before.
type Change struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// fileAction turns a plan command that writes a file (`echo V > /sys/...`,
// `sysctl -w a.b=V`) into the file and value; other commands (ethtool,
// taskset, irqbalance's configuration) are left to the operator.
func fileAction(cmd string) (path, value string, ok bool) {
	if v, p, found := strings.Cut(strings.TrimPrefix(cmd, "echo "), " > /"); found && strings.HasPrefix(cmd, "echo ") {
		return p, v, true
	}
	if kv, found := strings.CutPrefix(cmd, "sysctl -w "); found {
		k, v, found := strings.Cut(kv, "=")
		if found {
			return "proc/sys/" + strings.ReplaceAll(k, ".", "/"), v, true
		}
	}
	return "", "", false
}

// Errors Apply refuses with.
var (
	ErrReadOnly   = errors.New("ringtune: the kernel's settings are read-only here (a container with /sys and /proc/sys mounted read-only?): run ringtune on the host")
	ErrPermission = errors.New("ringtune: writing the kernel's settings needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")
)

// classify says why a setting cannot be written.
func classify(path string, err error) error {
	switch {
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %s", ErrReadOnly, path)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: %s", ErrPermission, path)
	}
	return fmt.Errorf("ringtune: %s: %w", path, err)
}

// Apply writes the settings the findings' commands name, under root,
// after checking that each can be written; with dryRun it only says what
// it would do. Commands that are not file writes are listed for the
// operator. If a write fails, the ones done are undone. It returns the
// changes made, for Revert.
func Apply(root string, fs []Finding, dryRun bool, w io.Writer) ([]Change, error) {
	var plan []Change
	for _, f := range fs {
		for _, cmd := range f.Commands {
			path, value, ok := fileAction(cmd)
			if !ok {
				fmt.Fprintf(w, "not applied, run it yourself if you want it: %s\n", cmd)
				continue
			}
			old, err := readSetting(root, path)
			if err != nil {
				return nil, classify(path, err)
			}
			plan = append(plan, Change{Path: path, Old: old, New: value})
		}
	}
	for _, c := range plan {
		f, err := openSetting(root, c.Path, os.O_WRONLY)
		if err != nil {
			return nil, classify(c.Path, err)
		}
		f.Close()
	}
	if dryRun {
		for _, c := range plan {
			fmt.Fprintf(w, "would write %s to /%s (now %s)\n", c.New, c.Path, c.Old)
		}
		return nil, nil
	}
	var done []Change
	for _, c := range plan {
		if err := writeSetting(root, c.Path, c.New); err != nil {
			rerr := undo(root, done, io.Discard)
			return nil, errors.Join(classify(c.Path, err), rerr)
		}
		fmt.Fprintf(w, "wrote %s to /%s (was %s)\n", c.New, c.Path, c.Old)
		done = append(done, c)
	}
	return done, nil
}

// settingDirs are the trees under a root that Apply writes and Revert
// restores: the sysctls and sysfs.
var settingDirs = []string{"proc/sys", "sys"}

// settingDir splits a path relative to the root into the one of
// settingDirs it lies under and the rest ("" if none).
func settingDir(path string) (dir, rest string) {
	for _, d := range settingDirs {
		if rest, ok := strings.CutPrefix(path, d+"/"); ok && rest != "" {
			return d, rest
		}
	}
	return "", ""
}

// openSetting opens the existing file path, relative to root, beneath
// its settingDirs entry with os.Root, so that neither ".." nor a symlink
// takes it out of there. flag never holds O_CREATE: a setting missing is
// an error, not a new file.
func openSetting(root, path string, flag int) (*os.File, error) {
	dir, rest := settingDir(path)
	if dir == "" {
		return nil, errors.New("not under proc/sys or sys")
	}
	r, err := os.OpenRoot(filepath.Join(root, dir))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.OpenFile(filepath.FromSlash(rest), flag, 0)
}

// readSetting returns the trimmed contents of a setting.
func readSetting(root, path string) (string, error) {
	f, err := openSetting(root, path, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return strings.TrimSpace(string(b)), err
}

// writeSetting writes value, and a newline, to a setting.
func writeSetting(root, path, value string) error {
	f, err := openSetting(root, path, os.O_WRONLY|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write([]byte(value + "\n"))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// undo writes back the old values, last change first.
func undo(root string, cs []Change, w io.Writer) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if err := writeSetting(root, c.Path, c.Old); err != nil {
			errs = append(errs, classify(c.Path, err))
			continue
		}
		fmt.Fprintf(w, "restored /%s to %s\n", c.Path, c.Old)
	}
	return errors.Join(errs...)
}
