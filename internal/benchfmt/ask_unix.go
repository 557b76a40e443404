//go:build unix

package benchfmt

import (
	"fmt"
	"syscall"
	"time"
)

// DefaultStatsWait is how long AskLoopTotals waits for the server's dump
// unless told otherwise.
const DefaultStatsWait = 2 * time.Second

// AskLoopTotals asks the server pid for its counters (SIGUSR1) and waits,
// at most wait (0: DefaultStatsWait), for a dump in path newer than
// afterSeq and than the one there before the signal (left by an earlier
// run).
func AskLoopTotals(pid int, path string, afterSeq uint64, wait time.Duration) (LoopTotals, error) {
	if old, err := ReadLoopTotals(path); err == nil {
		afterSeq = max(afterSeq, old.Seq)
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return LoopTotals{}, fmt.Errorf("signalling server %d: %w", pid, err)
	}
	if wait <= 0 {
		wait = DefaultStatsWait
	}
	deadline := time.Now().Add(wait)
	for {
		t, err := ReadLoopTotals(path)
		if err == nil && t.Seq > afterSeq {
			return t, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("%s: no new dump (seq still %d)", path, t.Seq)
			}
			return LoopTotals{}, err
		}
		time.Sleep(time.Millisecond)
	}
}
