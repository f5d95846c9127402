// Package powerloss cuts the power under a Shale cluster: three nodes (each broker and
// controller) run as real processes on loopback with their data directories on lazyfs
// mounts, which forget every write not fsynced. While idempotent acks=all producers write
// numbered records, every node is killed with SIGKILL at once and every mount drops what
// was not synced; then the nodes start again and every partition is read back from its
// start.
//
// Two topics share the cluster: one with acks.all.fsync=true (acknowledged once every ISR
// member has fsynced the record, by group commit), where no acknowledged record may be
// lost and the test fails if one is; and one with Kafka's defaults (the OS writes back
// when it likes), where the test reports how many acknowledged records were lost and does
// not fail on it. POWERCUT_FLUSH_MESSAGES=1 adds a third, strict like the first, with
// flush.messages=1, to compare. Either way every node must
// start and serve after each cut: recovery must make sense of whatever the cut left.
//
// It needs /dev/fuse and the right to mount (root, or fusermount's): it skips, saying why,
// without them. `go test ./...` and `make test` run a short version, two cuts (shortCuts;
// about 21 s on a loaded 2-core machine); POWERCUT=1, which `make chaos` sets, runs the
// full one, POWERCUT_CUTS cuts (default 3; make chaos: 10); POWERCUT_CUTS sets the number
// of cuts of either. A FUSE mount that hangs must not hang `make test`: a watchdog bounds
// the whole test (5.5 minutes for two cuts; see watchdog), and past it, or after any
// failure (a panic of the test included), the nodes are killed, the FUSE connections
// aborted and the mounts detached (plug.pull).
package powerloss

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/shalelog/shale/tests/powerloss/lazyfs"
	"github.com/shalelog/shale/tests/shaleproc"
)

var (
	shaleBin string
	// unavailable says why the tests cannot run here, nil where they can.
	unavailable error
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if unavailable, err = probe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if unavailable != nil {
		return m.Run() // every test skips and says why; no binary to build
	}
	bin, cleanup, err := shaleproc.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	shaleBin = bin
	return m.Run()
}

// probe mounts a lazyfs once and unmounts it, so that where FUSE cannot be used (no
// /dev/fuse, or mounting refused: not root, a container without the right) the tests skip
// without building a binary for nothing. It returns why they cannot run (unavailable), or
// an error where the mount came but would not go.
func probe() (unavailable, err error) {
	if err := lazyfs.Available(); err != nil {
		return err, nil
	}
	dir, err := os.MkdirTemp("", "powerloss-probe")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	backing, mnt := filepath.Join(dir, "disk"), filepath.Join(dir, "mnt")
	for _, d := range []string{backing, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	fs, err := lazyfs.Mount(backing, mnt)
	if err != nil {
		return fmt.Errorf("cannot mount FUSE here (unprivileged?): %w", err), nil
	}
	return nil, fs.Unmount()
}
