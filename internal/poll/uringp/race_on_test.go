//go:build linux && race

package uringp

// raceEnabled is set when the race detector is on: it allocates on its
// own, so allocation counts mean nothing then.
const raceEnabled = true
