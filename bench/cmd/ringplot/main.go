// Command ringplot draws the charts of a ringbench results file.
//
// Usage:
//
//	ringplot -in results.jsonl -out DIR
//	ringplot -bars table.csv -title TITLE -out FILE.svg
//
// It reads the summaries of the JSON-lines file written by ringbench ("-"
// for standard input) and writes, for every chart group, SVG charts of
// throughput, p99 latency, server CPU per request and server syscalls per
// request against the number of connections into DIR (created if needed),
// named <group>-<metric>.svg. It prints the path of each file it wrote, one
// per line. With -bars it draws one horizontal bar chart instead, from a
// CSV file (a header row whose second column is the unit, then a label
// and a value per bar; # starts a comment), into FILE. Errors go to standard error with exit status 1; bad flags exit
// with status 2.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ringpoll/ringpoll/bench/charts"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its arguments, output streams and exit status made
// explicit, for tests. "-in -" reads os.Stdin.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ringplot", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ringplot -in results.jsonl -out DIR\n       ringplot -bars table.csv -title TITLE -out FILE.svg\n\n")
		fs.PrintDefaults()
	}
	in := fs.String("in", "", "ringbench results `file` (JSON lines); - for standard input")
	out := fs.String("out", "", "`directory` to write the SVG charts into (created if needed); with -bars, the SVG file")
	bars := fs.String("bars", "", "draw one bar chart from this CSV `file` instead")
	title := fs.String("title", "", "the bar chart's `title` (with -bars)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "ringplot: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	case *bars != "" && *in != "":
		fmt.Fprintln(stderr, "ringplot: -in and -bars exclude each other")
		fs.Usage()
		return 2
	case *bars == "" && *title != "":
		fmt.Fprintln(stderr, "ringplot: -title goes with -bars")
		fs.Usage()
		return 2
	case *bars == "" && *in == "":
		fmt.Fprintln(stderr, "ringplot: -in is required")
		fs.Usage()
		return 2
	case *out == "":
		fmt.Fprintln(stderr, "ringplot: -out is required")
		fs.Usage()
		return 2
	}
	if *bars != "" {
		return drawBars(*bars, *title, *out, stdout, stderr)
	}

	var r io.Reader = os.Stdin
	name := "standard input"
	if *in != "-" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintf(stderr, "ringplot: %v\n", err)
			return 1
		}
		defer f.Close()
		r, name = f, *in
	}
	sums, err := charts.Read(r)
	if err != nil {
		fmt.Fprintf(stderr, "ringplot: %s: %v\n", name, err)
		return 1
	}
	if len(sums) == 0 {
		fmt.Fprintf(stderr, "ringplot: %s: no summaries, nothing to draw\n", name)
		return 0
	}
	paths, err := charts.Render(sums, *out)
	for _, p := range paths {
		fmt.Fprintln(stdout, p)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ringplot: %v\n", err)
		return 1
	}
	return 0
}

// drawBars draws the bar chart of the CSV file in into the SVG file out.
func drawBars(in, title, out string, stdout, stderr io.Writer) int {
	f, err := os.Open(in)
	if err != nil {
		fmt.Fprintf(stderr, "ringplot: %v\n", err)
		return 1
	}
	unit, bars, err := charts.ReadBars(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "ringplot: %s: %v\n", in, err)
		return 1
	}
	svg, err := charts.RenderBars(title, unit, bars)
	if err == nil {
		err = os.WriteFile(out, svg, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ringplot: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, out)
	return 0
}
