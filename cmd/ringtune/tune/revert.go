package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Revert restores what the state file at path says Apply changed, and
// removes the file. It writes nothing unless every change names a file
// under proc/sys or sys of the state's root: a clean relative path,
// without "..", that no symlink leads out of.
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
	if err := checkChanges(st); err != nil {
		return fmt.Errorf("ringtune: state file %s: %w; nothing reverted", path, err)
	}
	if err := undo(st.Root, st.Changes, w); err != nil {
		return err
	}
	return os.Remove(path)
}

// checkChanges says why a state's changes may not be written back, if
// any may not.
func checkChanges(st State) error {
	if st.Root == "" {
		return errors.New("no root")
	}
	root, err := filepath.EvalSymlinks(st.Root)
	if err != nil {
		return fmt.Errorf("root: %w", err)
	}
	for _, c := range st.Changes {
		if why := checkPath(root, c.Path); why != "" {
			return fmt.Errorf("refusing %s: %s", c.Path, why)
		}
	}
	return nil
}

// checkPath says why rel, a slash-separated path relative to root
// (symlinks resolved), may not be written, or returns "". A file missing
// passes: writeSetting does not create it.
func checkPath(root, rel string) string {
	dir, _ := settingDir(rel)
	switch {
	case path.IsAbs(rel):
		return "an absolute path"
	case slices.Contains(strings.Split(rel, "/"), ".."):
		return `it has ".."`
	case path.Clean(rel) != rel:
		return "not clean"
	case dir == "":
		return "not under proc/sys or sys"
	}
	full := filepath.Join(root, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(full)
	if errors.Is(err, fs.ErrNotExist) {
		if _, lerr := os.Lstat(full); lerr == nil {
			return "a symlink that leads nowhere"
		}
		return ""
	}
	if err != nil {
		return err.Error()
	}
	if !strings.HasPrefix(real, filepath.Join(root, filepath.FromSlash(dir))+string(filepath.Separator)) {
		return "a symlink leads out of " + dir
	}
	return ""
}
