package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"
)

// kcat (librdkafka) reads records as lines: it cannot set timestamps or per-record
// headers (-H applies to every record), and with -Z an empty key or value is sent as
// null, so the null-key and null-value records are written as empty text and the
// empty-key and empty-value ones are left out. librdkafka's default partitioner is
// consistent_random: CRC32 for keys, random for null and empty ones.
var kcatCaps = clientCaps{
	perRecordHeaders:   false,
	explicitTimestamps: false,
	nullKey:            true,
	emptyKey:           false,
	nullValue:          true,
	emptyValue:         false,
	emptyKeyHashed:     false,
	partitioner:        librdkafkaPartition,
	partitionerName:    "librdkafka's consistent_random (CRC32)",
	compressionGate:    librdkafkaCompressionGate,
}

func TestKcat(t *testing.T) {
	runClientMatrix(t, clientDriver{
		name: "kcat",
		caps: kcatCaps,
		missing: func() string {
			if _, err := exec.LookPath("kcat"); err != nil {
				return "no kcat on PATH"
			}
			return ""
		},
		run: runKcatCell,
	})
}

// kcatEnvelope is one record of `kcat -C -J` output.
type kcatEnvelope struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	TsType    string    `json:"tstype"`
	Ts        int64     `json:"ts"`
	Headers   []*string `json:"headers"` // name, value, name, value, ...
	Key       *string   `json:"key"`
	Payload   *string   `json:"payload"`
}

func runKcatCell(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error) {
	if err := createTopicWithAdmin(ctx, spec.Topic); err != nil {
		return nil, err
	}
	common := []string{"-b", target.bootstrap, "-t", spec.Topic, "-q", "-X", "client.id=shale-interop-kcat"}

	// Every record carries the same headers (kcatCaps.perRecordHeaders is false).
	produce := append([]string{"kcat", "-P", "-K", `\t`, "-Z",
		"-X", "compression.codec=" + spec.Codec,
		"-X", "linger.ms=5",
		"-X", "batch.num.messages=40",
		"-X", "request.required.acks=-1",
		// Kafka keeps a partition's order across retries only for idempotent producers.
		"-X", "enable.idempotence=true",
	}, common...)
	for _, h := range spec.Records[0].Headers {
		produce = append(produce, "-H", h.Key+"="+string(h.Value))
	}
	var stdin bytes.Buffer
	for _, r := range spec.Records {
		stdin.Write(r.Key)
		stdin.WriteByte('\t')
		stdin.Write(r.Value)
		stdin.WriteByte('\n')
	}
	out := &cellOutput{}
	if _, err := runLines(ctx, nil, produce, &stdin, func(line []byte) error {
		return fmt.Errorf("unexpected output from kcat -P: %q", line)
	}, &out.ProduceStart); err != nil {
		return nil, fmt.Errorf("producing: %w", err)
	}
	out.ProduceEnd = time.Now()

	consume := append([]string{"kcat", "-C", "-J", "-o", "beginning", "-e",
		"-c", fmt.Sprint(len(spec.Records)),
	}, common...)
	_, err := runLines(ctx, nil, consume, nil, func(line []byte) error {
		var env kcatEnvelope
		if err := json.Unmarshal(line, &env); err != nil {
			return fmt.Errorf("unparseable kcat -J line %q: %w", line, err)
		}
		c := consumedRecord{
			Partition:     env.Partition,
			Offset:        env.Offset,
			Key:           fromNullableString(env.Key),
			Value:         fromNullableString(env.Payload),
			Timestamp:     time.UnixMilli(env.Ts),
			TimestampType: env.TsType,
		}
		if len(env.Headers)%2 != 0 {
			return fmt.Errorf("odd header list in %q", line)
		}
		for i := 0; i < len(env.Headers); i += 2 {
			if env.Headers[i] == nil {
				return fmt.Errorf("null header name in %q", line)
			}
			c.Headers = append(c.Headers, header{Key: *env.Headers[i], Value: fromNullableString(env.Headers[i+1])})
		}
		out.Consumed = append(out.Consumed, c)
		return nil
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("consuming: %w", err)
	}
	return out, nil
}
