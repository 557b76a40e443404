package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Change is one file a plan writes, relative to the root, with the value
// it held before.
type Change struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// State is what Apply saves, so that Revert can undo it.
type State struct {
	Root    string    `json:"root"`
	Applied time.Time `json:"applied"`
	Changes []Change  `json:"changes"`
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
			old, err := os.ReadFile(filepath.Join(root, path))
			if err != nil {
				return nil, classify(path, err)
			}
			plan = append(plan, Change{Path: path, Old: strings.TrimSpace(string(old)), New: value})
		}
	}
	for _, c := range plan {
		f, err := os.OpenFile(filepath.Join(root, c.Path), os.O_WRONLY, 0)
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
		if err := os.WriteFile(filepath.Join(root, c.Path), []byte(c.New+"\n"), 0); err != nil {
			rerr := undo(root, done, io.Discard)
			return nil, errors.Join(classify(c.Path, err), rerr)
		}
		fmt.Fprintf(w, "wrote %s to /%s (was %s)\n", c.New, c.Path, c.Old)
		done = append(done, c)
	}
	return done, nil
}

// undo writes back the old values, last change first.
func undo(root string, cs []Change, w io.Writer) error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		if err := os.WriteFile(filepath.Join(root, c.Path), []byte(c.Old+"\n"), 0); err != nil {
			errs = append(errs, classify(c.Path, err))
			continue
		}
		fmt.Fprintf(w, "restored /%s to %s\n", c.Path, c.Old)
	}
	return errors.Join(errs...)
}

// SaveState writes st to path as JSON, creating its directory.
func SaveState(path string, st State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Revert restores what the state file at path says Apply changed, and
// removes the file.
func Revert(path string, w io.Writer) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("ringtune: nothing to revert: no state file %s (ringtune apply -yes writes it)", path)
	}
	if err != nil {
		return err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("ringtune: state file %s: %w", path, err)
	}
	if err := undo(st.Root, st.Changes, w); err != nil {
		return err
	}
	return os.Remove(path)
}
