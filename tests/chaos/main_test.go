package chaos

import (
	"fmt"
	"os"
	"testing"

	"github.com/shalelog/shale/tests/shaleproc"
)

// shaleBin is the binary under test: $SHALE_BIN, else the repository's bin/shale, else one
// built from this tree (shaleproc.Binary).
var shaleBin string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	bin, cleanup, err := shaleproc.Binary()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	shaleBin = bin
	return m.Run()
}
