//go:build !linux

package main

import (
	"fmt"
	"os"
)

// main says why ringecho does not run here: ringpoll's engines, and the
// process measurements it makes, need Linux.
func main() {
	fmt.Fprintln(os.Stderr, "ringecho: needs Linux (ringpoll's engines run only there)")
	os.Exit(1)
}
