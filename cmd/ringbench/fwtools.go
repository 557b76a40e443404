//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// debPackages names the Debian package of each client ringbench installs
// when it is missing.
var debPackages = map[string]string{"wrk": "wrk", "h2load": "nghttp2-client", "dnsperf": "dnsperf"}

// installer installs the clients; its fields are the outside world, so a
// test can stand in for it.
type installer struct {
	lookPath func(string) (string, error)
	// run runs a command to its end, returning its error with the tail of
	// its output.
	run  func(ctx context.Context, env []string, argv ...string) error
	euid int
	log  func(string) // says what it installs
}

// systemInstaller is the installer of this machine, logging to w.
func systemInstaller(w io.Writer) installer {
	return installer{lookPath: exec.LookPath, euid: os.Geteuid(), log: func(s string) { fmt.Fprintln(w, "ringbench:", s) }, run: func(ctx context.Context, env []string, argv ...string) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, tail0(strings.TrimSpace(out.String())))
		}
		return nil
	}}
}

// ensure finds the tools, installing the missing ones with apt-get
// (non-interactive, as root; with an apt-get update and a second try if
// the first install fails). It returns the path of each tool found and,
// for each still missing, why (both maps non-nil).
func (in installer) ensure(ctx context.Context, tools []string) (map[string]string, map[string]error) {
	found, missing := map[string]string{}, map[string]error{}
	var pkgs []string
	look := func() {
		pkgs = pkgs[:0]
		for _, t := range tools {
			if p, err := in.lookPath(t); err == nil {
				found[t] = p
				delete(missing, t)
			} else {
				missing[t] = err
				pkgs = append(pkgs, debPackages[t])
			}
		}
	}
	look()
	if len(missing) == 0 {
		return found, missing
	}
	why := func(err error) {
		for t := range missing {
			missing[t] = fmt.Errorf("%s is not installed and %w (Debian: apt-get install %s)", t, err, debPackages[t])
		}
	}
	if in.euid != 0 {
		why(errors.New("ringbench is not root, so it cannot install it"))
		return found, missing
	}
	if _, err := in.lookPath("apt-get"); err != nil {
		why(errors.New("there is no apt-get to install it with"))
		return found, missing
	}
	in.log("installing " + strings.Join(pkgs, " ") + " with apt-get")
	env := []string{"DEBIAN_FRONTEND=noninteractive"}
	install := append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, pkgs...)
	err := in.run(ctx, env, install...)
	if err != nil {
		// Stale package lists are the usual reason.
		if err = in.run(ctx, env, "apt-get", "update"); err == nil {
			err = in.run(ctx, env, install...)
		}
	}
	look()
	if len(missing) > 0 {
		if err == nil {
			err = errors.New("apt-get installed it without error but it is still not on PATH")
		}
		why(fmt.Errorf("installing it failed: %w", err))
	}
	return found, missing
}

// toolVersion returns the first line of a tool's version output.
func toolVersion(ctx context.Context, argv ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// wrk prints its version with the usage and exits 1.
	out, _ := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	// dnsperf prints it last, as "Version 2.10.0".
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Version "); ok {
			return filepath.Base(argv[0]) + " " + v
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	line, _, _ = strings.Cut(line, " Copyright")
	if line == "" {
		return argv[0]
	}
	return line
}

// moduleVersion returns the version of module mod that the go.mod at path
// requires, or "?".
func moduleVersion(gomod, mod string) string {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "?"
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == mod {
			return f[1]
		}
	}
	return "?"
}
