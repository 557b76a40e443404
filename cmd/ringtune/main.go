// Command ringtune shows where the kernel spends a server's packets: per
// CPU, the receive softirqs, softnet's processed, dropped and squeezed
// packets, the NICs' interrupts, and where a process's threads run, as
// rates over an interval.
//
//	ringtune inspect [-interval 2s] [-json] [-pid PID] [-root /]
//	ringtune plan    [-interval 2s] [-json] [-pid PID] [-root /]
//	ringtune apply   [-yes] [-state FILE] [plan's flags]
//	ringtune revert  [-state FILE] [-root /]
//
// plan diagnoses what inspect sees with rules, each citing its source
// (the kernel's scaling.rst and guest-halt-polling.rst, tuned's
// profiles, netdata's alarms), and
// prints the commands that would apply each. apply carries out the plan's
// file writes (sysfs and sysctls; ethtool and taskset are printed for the
// operator), as a dry run unless -yes, after checking each can be written,
// and saves the old values in -state (default /var/lib/ringtune/state.json
// under -root) for revert. It refuses clearly without root or where the
// settings are read-only (a container). It changes no interrupt's
// affinity, so irqbalance cannot undo it; the plan says how to ban a NIC's
// interrupts from irqbalance before pinning them by hand. revert writes
// back only files under proc/sys and sys of the root the state was
// applied to, and nothing at all if the state names any other file or
// if the state file is not root's (the caller's, for a user's tree) or
// others may write it.
//
// -root reads proc/... and sys/... under another directory laid out as the
// kernel lays them out (tests use fixture trees); a file missing there is
// reported as unknown. -then DIR takes the second reading from another
// tree instead of waiting, the interval then being nominal. ringtune is a module of its own, so that the
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
	"path/filepath"
	"syscall"
	"time"

	"github.com/ringpoll/ringpoll/cmd/ringtune/tune"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: ringtune inspect|plan [-interval 2s] [-json] [-pid PID] [-root DIR] [-then DIR]
       ringtune apply [-yes] [-state FILE] [-interval 2s] [-pid PID] [-root DIR] [-then DIR]
       ringtune revert [-state FILE] [-root DIR]`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "inspect", "plan", "apply":
		return inspect(args[0], args[1:], stdout, stderr)
	case "revert":
		return revert(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "ringtune: unknown command %q\n%s\n", args[0], usage)
	return 2
}

func inspect(cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringtune "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	interval := fs.Duration("interval", 2*time.Second, "how long to count over")
	asJSON := fs.Bool("json", false, "print JSON instead of tables")
	pid := fs.Int("pid", 0, "also show where this process's threads run")
	root := fs.String("root", "/", "the directory holding proc and sys")
	then := fs.String("then", "", "take the second reading from this tree instead of -root after -interval")
	yes := fs.Bool("yes", false, "apply: write the settings (without it, a dry run)")
	state := fs.String("state", "", "apply: where to save the old values (default var/lib/ringtune/state.json under -root)")
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
	for _, d := range []string{*root, *then} {
		if st, err := os.Stat(d); d != "" && (err != nil || !st.IsDir()) {
			fmt.Fprintf(stderr, "ringtune: %s: not a directory\n", d)
			return 2
		}
	}
	if cmd == "apply" && *yes && *root == "/" && os.Geteuid() != 0 {
		fmt.Fprintln(stderr, tune.ErrPermission)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a := tune.Read(*root, *pid)
	var b *tune.Snapshot
	if *then != "" {
		b = tune.Read(*then, *pid)
		b.Taken = a.Taken.Add(*interval)
	} else {
		select {
		case <-time.After(*interval):
		case <-ctx.Done():
			return 1
		}
		b = tune.Read(*root, *pid)
	}
	r := tune.Compute(a, b)
	if cmd == "apply" {
		fs := tune.Plan(r)
		tune.RenderPlan(stdout, fs)
		fmt.Fprintln(stdout)
		changes, err := tune.Apply(*root, fs, !*yes, stdout)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		if !*yes {
			fmt.Fprintln(stdout, "dry run: nothing written; -yes writes it")
			return 0
		}
		path := statePath(*state, *root)
		// An absolute root, so that revert run from another directory
		// writes back to the same tree.
		abs, err := filepath.Abs(*root)
		if err == nil {
			err = tune.SaveState(path, tune.State{Root: abs, Applied: time.Now(), Changes: changes})
		}
		if err != nil {
			fmt.Fprintf(stderr, "ringtune: saving the state to %s: %v (the changes stay; they are listed above)\n", path, err)
			return 1
		}
		fmt.Fprintf(stdout, "%d settings written; ringtune revert -state %s undoes them\n", len(changes), path)
		return 0
	}
	var out any = r
	if cmd == "plan" {
		out = tune.Plan(r)
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			fmt.Fprintln(stderr, "ringtune:", err)
			return 1
		}
		return 0
	}
	if cmd == "plan" {
		tune.RenderPlan(stdout, out.([]tune.Finding))
		return 0
	}
	r.Render(stdout, *pid)
	return 0
}

func statePath(state, root string) string {
	if state != "" {
		return state
	}
	return filepath.Join(root, "var", "lib", "ringtune", "state.json")
}

func revert(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringtune revert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", "/", "the directory holding proc and sys")
	state := fs.String("state", "", "the state file apply wrote (default var/lib/ringtune/state.json under -root)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := tune.Revert(statePath(*state, *root), stdout); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
