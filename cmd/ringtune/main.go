// Command ringtune shows where the kernel spends a server's packets: per
// CPU, the receive softirqs, softnet's processed, dropped and squeezed
// packets, the NICs' interrupts, and where a process's threads run, as
// rates over an interval.
//
//	ringtune inspect [-interval 2s] [-json] [-pid PID] [-root /]
//
// -root reads proc/... and sys/... under another directory laid out as the
// kernel lays them out (tests use fixture trees); a file missing there is
// reported as unknown. ringtune is a module of its own, so that the
// library's go.mod stays free of what it needs (github.com/prometheus/procfs).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/cmd/ringtune/tune"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: ringtune inspect [-interval 2s] [-json] [-pid PID] [-root DIR]"

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "inspect":
		return inspect(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ringtune: unknown command %q\n%s\n", args[0], usage)
	return 2
}

func inspect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringtune inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	interval := fs.Duration("interval", 2*time.Second, "how long to count over")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	pid := fs.Int("pid", 0, "also show where this process's threads run")
	root := fs.String("root", "/", "the directory holding proc and sys")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *interval <= 0 || *interval > time.Hour {
		fmt.Fprintf(stderr, "ringtune: -interval %v: want more than 0, at most 1h\n", *interval)
		return 2
	}
	if st, err := os.Stat(*root); err != nil || !st.IsDir() {
		fmt.Fprintf(stderr, "ringtune: -root %s: not a directory\n", *root)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a := tune.Read(*root, *pid)
	select {
	case <-time.After(*interval):
	case <-ctx.Done():
		return 1
	}
	r := tune.Compute(a, tune.Read(*root, *pid))
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(r); err != nil {
			fmt.Fprintln(stderr, "ringtune:", err)
			return 1
		}
		return 0
	}
	r.Render(stdout, *pid)
	return 0
}
