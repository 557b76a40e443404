//go:build linux

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/ringpoll/ringpoll/internal/benchfmt"
)

// The reports made again (-report) from an earlier results file: its
// runs, in the file's order, are all they start from.

// readLines decodes the lines of the results file path whose kind is
// kind (the line holds "kind":"<kind>"), in the file's order.
func readLines[T any](path, kind string) ([]T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	tag := []byte(`"kind":"` + kind + `"`)
	var vs []T
	for i, line := range bytes.Split(b, []byte("\n")) {
		if !bytes.Contains(line, tag) {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

// readRuns reads the runs of the results file path, at least one, and
// the servers in the order of their first run: the order of the tables.
func readRuns(path string) ([]benchfmt.Run, []string, error) {
	runs, err := readLines[benchfmt.Run](path, "run")
	if err != nil {
		return nil, nil, err
	}
	if len(runs) == 0 {
		return nil, nil, fmt.Errorf("%s: no runs", path)
	}
	var order []string
	for _, run := range runs {
		if !slices.Contains(order, run.Server) {
			order = append(order, run.Server)
		}
	}
	return runs, order, nil
}

// againMeta is the account of how the runs of the results file results
// were made, for their report made again by command: what the file does
// not keep is "as in" it.
func againMeta(results, command, placement string, repeats int) meta {
	as := "as in " + results
	return meta{Date: as, Command: command, Machine: as, Go: "-", Placement: placement,
		Repeats: repeats, Warmup: as, Duration: as, Syscalls: as}
}
