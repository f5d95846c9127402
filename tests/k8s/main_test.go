package k8s

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// shaleBin is the binary the process tests run: $SHALE_BIN (what `make test-k8s` sets),
// else the repository's bin/shale, else one built into a temporary directory.
var shaleBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("SHALE_BIN"); bin != "" {
		shaleBin = bin
		return m.Run()
	}
	if bin, err := filepath.Abs("../../bin/shale"); err == nil {
		if _, err := os.Stat(bin); err == nil {
			shaleBin = bin
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "shale-k8s-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shaleBin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-trimpath", "-o", shaleBin, "github.com/shalelog/shale/cmd/shale")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build shale:", err)
		return 1
	}
	return m.Run()
}
