// Package cluster runs Shale as real processes on loopback: a quorum of three controllers
// (process.roles=controller) and three brokers (process.roles=broker), and checks what
// failures do to them: kill -9 of the Raft leader, kill -9 of a broker, SIGSTOP of a
// leader broker, and a restart of the whole cluster from its snapshots; and what the web
// console of a broker shows of a killed one.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// shaleBin is the binary under test: $CLUSTER_TEST_BIN, or built from this tree.
var shaleBin string

func TestMain(m *testing.M) {
	if bin := os.Getenv("CLUSTER_TEST_BIN"); bin != "" {
		shaleBin = bin
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "shale-cluster-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shaleBin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", shaleBin, "github.com/shalelog/shale/cmd/shale")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build shale:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
