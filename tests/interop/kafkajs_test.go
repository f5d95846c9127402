package interop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// kafkajs 2.x's DefaultPartitioner is the Java-compatible one: murmur2 for every
// non-null key, round-robin for null keys.
var kafkajsCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     true,
	partitioner:        javaPartition,
	partitionerName:    "kafkajs' DefaultPartitioner (murmur2)",
}

// kafkajs core has gzip only; the rest are plugin packages in node/package.json.
// kafkajsCodecPlugins names the package each needs, checked before a cell runs.
var kafkajsCodecPlugins = map[string]string{
	"snappy": "kafkajs-snappy",
	"lz4":    "kafkajs-lz4",
}

func TestKafkaJS(t *testing.T) {
	nodeDir, err := filepath.Abs("node")
	if err != nil {
		t.Fatal(err)
	}
	runClientMatrix(t, clientDriver{
		name:    "kafkajs",
		caps:    kafkajsCaps,
		missing: kafkajsMissing(nodeDir),
		unsupported: func(codec string) string {
			if codec == "zstd" {
				// @kafkajs/zstd 0.1.1 is the only zstd codec kafkajs documents; it depends on
				// cppzst 2.0.6, whose native build fails against Node 20's headers (it
				// compiles as C++14; node.h needs C++17).
				return "@kafkajs/zstd (cppzst 2.0.6) does not build on Node 20"
			}
			plugin, ok := kafkajsCodecPlugins[codec]
			if !ok {
				return ""
			}
			// kafkajs-lz4 needs lz4's native module; resolving it loads it.
			probe := exec.Command("node", "-e", "require("+`"`+plugin+`"`+")")
			probe.Dir = nodeDir
			if out, err := probe.CombinedOutput(); err != nil {
				return plugin + " does not load here (" + firstLine(string(out)) + ")"
			}
			return ""
		},
		run: kafkajsScript(nodeDir, modeCell),
	})
}

func kafkajsScript(nodeDir, mode string) func(context.Context, *testing.T, *cellSpec) (*cellOutput, error) {
	return func(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
		return runScript(ctx, t, spec, mode, []string{"KAFKAJS_NO_PARTITIONER_WARNING=1"},
			"node", filepath.Join(nodeDir, "kafkajs_cell.js"))
	}
}

func kafkajsMissing(nodeDir string) func() string {
	return func() string {
		if _, err := exec.LookPath("node"); err != nil {
			return "no node on PATH"
		}
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "kafkajs", "package.json")); err != nil {
			return "kafkajs not installed in tests/interop/node/node_modules"
		}
		return ""
	}
}
