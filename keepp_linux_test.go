package ringpoll

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/ringpoll/ringpoll/internal/poll/uringp"
)

// keepPEngines are the engines WithLoopKeepsP applies to.
var keepPEngines = map[Engine]bool{EngineUring: true, EngineUringHybrid: true, EngineUringReactor: true}

// TestLoopKeepsP serves echo exchanges with WithLoopKeepsP while garbage
// collections stop the world again and again, in the inline and the
// goroutine handler styles, and checks every byte, and the loop's count of
// waits that kept their P: some under GOMAXPROCS=2 (for the engines the
// option applies to), none under GOMAXPROCS=1, where keeping the only P
// would starve every other goroutine. The goroutine handlers run on the
// Ps the loop left, so a loop that kept a P it should not have shows up
// here as a hang.
func TestLoopKeepsP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	forEachEngine(t, func(t *testing.T, e Engine) {
		for _, procs := range []int{1, 2} {
			for _, style := range []tsStyle{tsInline, tsHandler} {
				t.Run(fmt.Sprintf("gomaxprocs=%d/%s", procs, style), func(t *testing.T) {
					runtime.GOMAXPROCS(procs)
					uringp.RefreshProcs()
					ln := listen(t, e, "tcp", WithLoops(1), WithLoopKeepsP())
					opts := []Option{}
					if style == tsInline {
						opts = append(opts, WithInlineHandler())
					}
					tsServeHandler(t, ln, tsEchoHandler, opts...)

					stopGC := make(chan struct{})
					var gcs sync.WaitGroup
					gcs.Go(func() {
						for {
							select {
							case <-stopGC:
								return
							default:
								runtime.GC()
							}
						}
					})
					defer func() { close(stopGC); gcs.Wait() }()

					const clients, rounds = 8, 200
					errs := make(chan error, clients)
					var wg sync.WaitGroup
					for i := range clients {
						c := tsDialStd(t, "tcp", ln.Addr().String())
						wg.Go(func() {
							defer c.Close()
							msg := bytes.Repeat([]byte{byte('a' + i)}, 1024)
							for r := range rounds {
								if err := tsEchoOnce(c, string(msg)); err != nil {
									errs <- fmt.Errorf("client %d round %d: %w", i, r, err)
									return
								}
							}
						})
					}
					wg.Wait()
					close(errs)
					tsReportErrors(t, errs)

					var kept uint64
					for _, s := range ln.Stats() {
						kept += s.WaitsKeptP
					}
					switch {
					case procs == 1 && kept != 0:
						t.Fatalf("GOMAXPROCS=1: %d waits kept the only P", kept)
					case procs == 2 && keepPEngines[e] && kept == 0:
						t.Fatalf("GOMAXPROCS=2: no wait kept its P")
					case !keepPEngines[e] && kept != 0:
						t.Fatalf("%v ignores WithLoopKeepsP, yet %d waits kept their P", e, kept)
					}
					t.Logf("%d waits kept their P", kept)
				})
			}
		}
	})
}
