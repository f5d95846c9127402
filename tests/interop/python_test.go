package interop

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
)

// debianPython is the interpreter Debian's python3-confluent-kafka and python3-kafka
// packages install into; the python3 on PATH may be another one without them.
const debianPython = "/usr/bin/python3"

// confluent-kafka-python runs on librdkafka: consistent_random places keys by CRC32 and
// empty or null keys at random.
var confluentCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     false,
	partitioner:        librdkafkaPartition,
	partitionerName:    "librdkafka's consistent_random (CRC32)",
	compressionGate:    librdkafkaCompressionGate,
}

// kafka-python's DefaultPartitioner is the Java one: murmur2 for every non-null key.
var kafkaPythonCaps = clientCaps{
	perRecordHeaders:   true,
	explicitTimestamps: true,
	nullKey:            true,
	emptyKey:           true,
	nullValue:          true,
	emptyValue:         true,
	emptyKeyHashed:     true,
	partitioner:        javaPartition,
	partitionerName:    "kafka-python's DefaultPartitioner (murmur2)",
}

func TestConfluentKafkaPython(t *testing.T) {
	runClientMatrix(t, clientDriver{
		name:    "confluent-kafka-python",
		caps:    confluentCaps,
		missing: pythonModuleMissing("confluent_kafka"),
		run:     pythonCell("confluent_cell.py"),
	})
}

func TestKafkaPython(t *testing.T) {
	runClientMatrix(t, clientDriver{
		name:    "kafka-python",
		caps:    kafkaPythonCaps,
		missing: pythonModuleMissing("kafka"),
		run:     pythonCell("kafkapython_cell.py"),
	})
}

func pythonModuleMissing(module string) func() string {
	return func() string {
		out, err := exec.Command(debianPython, "-c", "import "+module).CombinedOutput()
		if err != nil {
			return debianPython + " cannot import " + module + ": " + firstLine(string(out)+err.Error())
		}
		return ""
	}
}

func pythonCell(script string) func(context.Context, *testing.T, *cellSpec) (*cellOutput, error) {
	return pythonScript(script, modeCell)
}

func pythonScript(script, mode string) func(context.Context, *testing.T, *cellSpec) (*cellOutput, error) {
	return func(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
		path, err := filepath.Abs(filepath.Join("python", script))
		if err != nil {
			return nil, err
		}
		// -u: unbuffered, so events arrive as they happen; -B: no __pycache__ in the tree.
		return runScript(ctx, t, spec, mode, []string{"PYTHONDONTWRITEBYTECODE=1"}, debianPython, "-u", "-B", path)
	}
}
