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
// It runs only with POWERCUT=1 (a FUSE mount that hangs must not hang `make test`), and
// needs /dev/fuse and the right to mount (root): it skips, saying why, without them. It is
// part of `make chaos`. POWERCUT_CUTS sets the number of cuts (default 3; make chaos: 10).
package powerloss

import (
	"fmt"
	"os"
	"testing"

	"github.com/shalelog/shale/tests/powerloss/lazyfs"
	"github.com/shalelog/shale/tests/shaleproc"
)

var shaleBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if lazyfs.Available() != nil {
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
