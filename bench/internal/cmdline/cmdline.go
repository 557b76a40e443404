// Package cmdline is the command line the bench commands that take flags
// only (frameserve, peerecho, quicload) share: how their flags parse, and
// the exit code a bad command line gets.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// ErrReported marks a flag error the flag package has already printed,
// with the usage, so that it is not printed again.
var ErrReported = errors.New("flag error already reported")

// FlagSet returns the flag set of the command name, which prints to
// stderr and returns its errors (flag.ContinueOnError), for Parse.
func FlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses args, flags only, with fs (from FlagSet). It returns
// flag.ErrHelp for -h, an error the flag package printed wrapped around
// ErrReported, and for an argument left over an error that names it.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrReported, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only", fs.Arg(0), fs.Name())
	}
	return nil
}

// Exit is the exit code of the command name whose command line failed
// to parse or validate with err: 0 for -h, else 2. An error the flag
// package has not printed it prints to stderr after the command's name,
// followed by usage unless that is empty.
func Exit(stderr io.Writer, name string, err error, usage string) int {
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrReported):
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if usage != "" {
		fmt.Fprintln(stderr, usage)
	}
	return 2
}
