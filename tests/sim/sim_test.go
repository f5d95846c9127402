package sim

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var (
	flagSeed  = flag.Uint64("sim.seed", 0, "run only this seed, with its trace and the brokers' logs")
	flagSeeds = flag.Int("sim.seeds", 0, "how many seeds to run (default: SHALE_SIM_SEEDS, else 300; 40 with -short, 20 under -race)")
	flagStart = flag.Uint64("sim.start", 1, "first seed")
)

func seedCount() int {
	if *flagSeeds > 0 {
		return *flagSeeds
	}
	if v := os.Getenv("SHALE_SIM_SEEDS"); v != "" {
		var n int
		if _, err := fmt.Sscan(v, &n); err == nil && n > 0 {
			return n
		}
	}
	switch {
	case raceEnabled:
		return 20
	case testing.Short():
		return 40
	}
	return 300
}

// runDir is a fresh directory for one run's logs: in memory where /dev/shm exists (a
// run writes and deletes thousands of small segment files), else the test's temp dir.
func runDir(t *testing.T) string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "shale-sim-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(d) })
			return d
		}
	}
	return t.TempDir()
}

// TestSimulation runs many seeds; each failing seed reports its violations, the faults
// it drew, the command that replays it and the end of its event trace.
func TestSimulation(t *testing.T) {
	if *flagSeed != 0 {
		res := Run(Options{Seed: *flagSeed, Dir: runDir(t), Log: os.Stderr})
		t.Logf("seed %d: %s\n%+v\ntrace:\n%s", res.Seed, res.Faults, res.Stats, res.Trace)
		for _, v := range res.Violations {
			t.Errorf("violation: %s", v)
		}
		return
	}
	n := seedCount()
	start := time.Now()
	var failed atomic.Int64
	var events, acked, followerReads atomic.Int64
	t.Run("seeds", func(t *testing.T) {
		for i := range n {
			seed := *flagStart + uint64(i)
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				res := Run(Options{Seed: seed, Dir: runDir(t)})
				events.Add(int64(res.Stats.Events))
				acked.Add(int64(res.Stats.Acked))
				followerReads.Add(int64(res.Stats.FollowerReads))
				if len(res.Violations) > 0 {
					failed.Add(1)
					t.Errorf("seed %d violates safety: %s\nfaults: %s\nreplay: %s\nlast events:\n%s",
						seed, strings.Join(res.Violations, "; "), res.Faults, Replay(seed), res.Trace)
				}
			})
		}
	})
	t.Logf("%d seeds from %d in %v: %d failed; %d events, %d records acknowledged, %d consumer fetches served by followers", n, *flagStart, time.Since(start).Round(time.Millisecond),
		failed.Load(), events.Load(), acked.Load(), followerReads.Load())
}

// TestDeterministic runs one seed twice and compares the traces.
func TestDeterministic(t *testing.T) {
	a := Run(Options{Seed: 7, Dir: runDir(t)})
	b := Run(Options{Seed: 7, Dir: runDir(t)})
	if a.Trace != b.Trace || a.Stats != b.Stats {
		t.Fatalf("seed 7 ran differently twice: %+v vs %+v\nfirst:\n%s\nsecond:\n%s", a.Stats, b.Stats, a.Trace, b.Trace)
	}
}
