package interop

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Environment variables that pick and shape the target.
const (
	// envBootstrap names a running broker ("host:port[,host:port]") to test instead of
	// starting one.
	envBootstrap = "SHALE_BOOTSTRAP"
	// envTarget set to "kfake" runs the suite against an in-process franz-go kfake
	// cluster, which is how the suite itself is debugged.
	envTarget = "SHALE_INTEROP_TARGET"
	// envShaleBin points at a shale binary to start (default ../../bin/shale, built from
	// ./cmd/shale when missing).
	envShaleBin = "SHALE_BIN"
	// envServeArgs is appended, split on spaces, to the `shale serve` command line.
	envServeArgs = "SHALE_INTEROP_SERVE_ARGS"
	// envMatrixOut names a file the run writes its client x codec results to (markdown).
	envMatrixOut = "SHALE_INTEROP_MATRIX_OUT"
	// envRegistryURL is the schema registry of the broker named by SHALE_BOOTSTRAP
	// ("http://host:port"); without it the schema registry tests skip against an external
	// broker. A Shale node the suite starts serves its own.
	envRegistryURL = "SHALE_SCHEMA_REGISTRY_URL"
	// envTrace set to anything logs each client script's stderr (with -v), where the
	// scripts also trace their phases.
	envTrace = "SHALE_INTEROP_TRACE"
)

// suiteTarget is the broker every test talks to, set up once by TestMain.
type suiteTarget struct {
	// name says what the broker is ("kfake", "shale <path>", "external <addr>"), for
	// messages and the matrix.
	name      string
	bootstrap string
	seeds     []string
	// registryURL is the broker's schema registry ("http://127.0.0.1:port"), "" when the
	// target has none (kfake).
	registryURL string
	// client is the suite's own franz-go client, for raw requests.
	client *kgo.Client
	// admin is a franz-go admin client used to create topics for clients that cannot and
	// to check what clients created.
	admin *kadm.Client
	// logTail returns the end of the broker's own log, if the suite started it, to
	// attach to failures.
	logTail func() string
}

// target is shared by every test in the package; TestMain sets it before any test runs
// and nothing writes it afterwards.
var target *suiteTarget

// results collects each cell's outcome for the summary TestMain prints.
var results = newMatrix()

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	broker, stop, err := startTarget(ctx)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: no target broker: %v\n", err)
		return 1
	}
	defer stop()

	admin, err := kgo.NewClient(kgo.SeedBrokers(broker.seeds...))
	if err != nil {
		fmt.Fprintf(os.Stderr, "interop: admin client: %v\n", err)
		return 1
	}
	defer admin.Close()
	broker.client = admin
	broker.admin = kadm.NewClient(admin)
	target = broker
	fmt.Printf("interop: target %s at %s\n", broker.name, broker.bootstrap)

	code := m.Run()
	summary := results.markdown(broker.name)
	if summary != "" {
		fmt.Printf("\ninterop results against %s:\n%s\n", broker.name, summary)
		if path := os.Getenv(envMatrixOut); path != "" {
			if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "interop: writing %s: %v\n", path, err)
			}
		}
	}
	if code != 0 && broker.logTail != nil {
		fmt.Fprintf(os.Stderr, "interop: broker log tail:\n%s\n", broker.logTail())
	}
	return code
}
