package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// shaleBin is the binary under test: $SHALE_BIN, else the repository's bin/shale (what
// `make build` writes, and what `make test` and `make chaos` build first), else one built
// from this tree into a temporary directory.
var shaleBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if bin := os.Getenv("SHALE_BIN"); bin != "" {
		shaleBin = bin
		return m.Run()
	}
	if root, err := repoRoot(); err == nil {
		bin := filepath.Join(root, "bin", "shale")
		if _, err := os.Stat(bin); err == nil {
			shaleBin = bin
			return m.Run()
		}
	}
	dir, err := os.MkdirTemp("", "shale-chaos-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	shaleBin = filepath.Join(dir, "shale")
	build := exec.Command("go", "build", "-o", shaleBin, "github.com/shalelog/shale/cmd/shale")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build shale:", err)
		return 1
	}
	return m.Run()
}

// repoRoot is the directory holding go.mod, above the test's working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
