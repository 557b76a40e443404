//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// fwPrepare finds the clients the scenarios need, installing wrk, h2load
// and dnsperf when missing, and builds frameserve, ringplot, quicload and
// grpc-go's benchmark client in bin. It drops the scenarios whose client
// is missing, noting why, and returns the clients' paths and versions.
func fwPrepare(ctx context.Context, fc *fwConfig, bin string, note func(string)) (map[string]string, []string, error) {
	// The clients: wrk, h2load and dnsperf from Debian, the gRPC one and
	// quicload built.
	var want []string
	for _, sc := range fc.scenarios {
		if _, deb := debPackages[sc.client]; deb && !slices.Contains(want, sc.client) {
			want = append(want, sc.client)
		}
	}
	tools, missing := systemInstaller(fc.stderr).ensure(ctx, want)
	benchDir := filepath.Join(fc.src, "bench")
	fmt.Fprintf(fc.stderr, "ringbench: building frameserve, ringplot, quicload and grpc-go's benchmark client in %s\n", benchDir)
	pkgs := []string{"./cmd/frameserve", "./cmd/ringplot"}
	quic := slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.client == "quicload" })
	if quic {
		pkgs = append(pkgs, "./cmd/quicload")
		tools["quicload"] = filepath.Join(bin, "quicload")
	}
	if err := goBuild(ctx, benchDir, bin, pkgs...); err != nil {
		return nil, nil, fmt.Errorf("the framework servers are in the bench module, which did not build: %w", err)
	}
	if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return s.client == "grpc" }) {
		tools["grpc"] = filepath.Join(bin, "grpcbench")
		if err := goBuildOne(ctx, benchDir, tools["grpc"], "google.golang.org/grpc/benchmark/client"); err != nil {
			missing["grpc"] = err
		}
	}
	fc.scenarios = slices.DeleteFunc(fc.scenarios, func(sc fwScenario) bool {
		if err := missing[sc.client]; err != nil {
			note(fmt.Sprintf("%s is left out: %v", sc.name, err))
			return true
		}
		return false
	})
	if len(fc.scenarios) == 0 {
		return nil, nil, errors.New("no scenario left to run")
	}
	var versions []string
	if slices.ContainsFunc(fc.scenarios, func(s fwScenario) bool { return slices.Equal(s.servers, hertzServers) }) {
		versions = append(versions, "Hertz "+moduleVersion(filepath.Join(benchDir, "go.mod"), "github.com/cloudwego/hertz"))
	}
	for _, t := range want {
		if tools[t] != "" {
			versions = append(versions, toolVersion(ctx, tools[t], map[string]string{"wrk": "-v", "h2load": "--version", "dnsperf": "-h"}[t]))
		}
	}
	if tools["grpc"] != "" {
		versions = append(versions, "grpc-go "+moduleVersion(filepath.Join(benchDir, "go.mod"), "google.golang.org/grpc")+" (benchmark/client)")
	}
	if quic {
		versions = append(versions, "quicload (bench/cmd/quicload, quic-go "+
			moduleVersion(filepath.Join(benchDir, "go.mod"), "github.com/quic-go/quic-go")+" on std UDP sockets, as the servers' quic-go)")
	}

	return tools, versions, nil
}

// goVersion is the go command's version, which built the servers.
func goVersion() string {
	out, err := exec.Command(goTool(), "env", "GOVERSION").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

// goBuildOne builds one package, of dir's module or one it requires, to
// the file out.
func goBuildOne(ctx context.Context, dir, out, pkg string) error {
	cmd := exec.CommandContext(ctx, goTool(), "build", "-o", out, pkg)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr, cmd.Stdout = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s (in %s): %v: %s", pkg, dir, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// makeFile writes a temporary file of size pseudo-random bytes (so no
// layer can compress it) and returns its path.
func makeFile(size int64) (string, error) {
	f, err := os.CreateTemp("", "ringbench-file-*.bin")
	if err != nil {
		return "", err
	}
	rng := rand.NewChaCha8([32]byte{'r', 'i', 'n', 'g'})
	buf := make([]byte, 1<<20)
	for n := int64(0); n < size && err == nil; n += int64(len(buf)) {
		rng.Read(buf)
		_, err = f.Write(buf[:min(int64(len(buf)), size-n)])
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
