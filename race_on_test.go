//go:build race

package ringpoll

// raceEnabled is set when the race detector is on; sync.Pool then drops a
// random quarter of Puts on purpose, so allocation counts are meaningless.
const raceEnabled = true
