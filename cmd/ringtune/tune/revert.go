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
	"time"
)

// State is what Apply saves, so that Revert can undo it.
type State struct {
	// Root is the directory whose proc/sys and sys Apply wrote under
	// ("/" for this machine), absolute so that it names the same tree
	// from any working directory.
	Root    string    `json:"root"`
	Applied time.Time `json:"applied"`
	Changes []Change  `json:"changes"`
}

// SaveState writes st to path as JSON, mode 0644, creating its directory.
// It writes a new file and renames it over any old one, so that the
// file's owner and mode are the saver's and 0644 whatever an old file at
// path had (Revert refuses others).
func SaveState(path string, st State) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".state-*.json")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	err = errors.Join(err, f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// Revert restores what the state file at path says Apply changed, and
// removes the file. It refuses a state file that is not a regular file,
// that group or others may write, or whose owner is neither root nor the
// caller (only root, when root calls). It writes nothing unless every
// change names a file under proc/sys or sys of the state's root: a clean
// relative path, without "..", that no symlink leads out of.
func Revert(path string, w io.Writer) error {
	b, err := readState(path)
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

// readState reads the state file at path, checking the file it opened.
func readState(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ringtune: nothing to revert: no state file %s (ringtune apply -yes writes it)", path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if why := checkStateFile(fi); why != "" {
		return nil, fmt.Errorf("ringtune: state file %s: %s; nothing reverted", path, why)
	}
	return io.ReadAll(f)
}

// checkStateFile says why a state file may not be trusted, or returns "".
// Revert writes as root what the file says, so only root may have
// written it; a user reverting a tree of their own may own it too.
func checkStateFile(fi fs.FileInfo) string {
	if !fi.Mode().IsRegular() {
		return "not a regular file"
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Sprintf("writable by group or others (mode %v)", fi.Mode().Perm())
	}
	uid, err := fileOwner(fi)
	if err != nil {
		return err.Error()
	}
	if euid := os.Geteuid(); uid != 0 && uid != euid {
		if euid == 0 {
			return fmt.Sprintf("owned by uid %d, not root", uid)
		}
		return fmt.Sprintf("owned by uid %d, neither root nor you (uid %d)", uid, euid)
	}
	return ""
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
