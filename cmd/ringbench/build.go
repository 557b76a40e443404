//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// bins are the programs a run needs, built from source.
type bins struct {
	ringecho, ringload string // the ringpoll servers; the load generator and std server
	peerecho, ringplot string // from the bench module: netpoll and gnet, the charts
	peersErr           error  // why peerecho and ringplot are missing, if they are
	cEcho              string // bench/c/uring_echo.c, the C liburing reference server
	cErr               error  // why cEcho is missing, if it is
	cUDP               string // bench/c/udp_recv.c, the C recvmmsg server (-udp)
	cUDPRR             string // bench/c/udp_rr.c, the C request/response client (-udp-client c)
}

// findSource returns the repository root: dir if given, else the first
// directory from the working directory up whose go.mod is ringpoll's.
func findSource(dir string) (string, error) {
	isRoot := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		return err == nil && bytes.HasPrefix(b, []byte("module github.com/ringpoll/ringpoll\n"))
	}
	if dir != "" {
		if !isRoot(dir) {
			return "", fmt.Errorf("-src %s: no ringpoll go.mod there", dir)
		}
		return filepath.Abs(dir)
	}
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRoot(d) {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", errors.New("not inside the ringpoll repository: run ringbench from its checkout (go run ./cmd/ringbench) or give -src")
		}
		d = up
	}
}

// goTool returns the go command: from PATH, else from the usual install
// directory (where .ci/run finds it too).
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// build compiles the programs into dir. The ringpoll ones must build; the
// bench module's (which fetches netpoll, gnet and gonum/plot through the
// module proxy) may fail, and then bins.peersErr says why.
func build(ctx context.Context, src, dir string, peers, c bool) (bins, error) {
	b := bins{
		ringecho: filepath.Join(dir, "ringecho"),
		ringload: filepath.Join(dir, "ringload"),
		peerecho: filepath.Join(dir, "peerecho"),
		ringplot: filepath.Join(dir, "ringplot"),
		cEcho:    filepath.Join(dir, "uring_echo"),
	}
	if err := goBuild(ctx, src, dir, "./cmd/ringecho", "./cmd/ringload"); err != nil {
		return b, err
	}
	b.cErr = errors.New("not asked for")
	if c {
		b.cErr = cBuild(ctx, filepath.Join(src, "bench", "c", "uring_echo.c"), b.cEcho)
	}
	if !peers {
		b.peersErr = errors.New("not asked for")
		return b, nil
	}
	b.peersErr = goBuild(ctx, filepath.Join(src, "bench"), dir, "./cmd/peerecho", "./cmd/ringplot")
	return b, nil
}

// cBuild compiles the C reference server; it needs a C compiler and
// liburing's headers (Debian: gcc, liburing-dev).
func cBuild(ctx context.Context, src, out string) error {
	cmd := exec.CommandContext(ctx, "cc", "-O2", "-o", out, src, "-luring")
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cc %s: %v: %s (it needs gcc and liburing-dev)", filepath.Base(src), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func goBuild(ctx context.Context, dir, out string, pkgs ...string) error {
	cmd := exec.CommandContext(ctx, goTool(), append([]string{"build", "-o", out + "/"}, pkgs...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %v: %s", strings.Join(pkgs, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
