package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// clientDriver is one client as the matrix runs it.
type clientDriver struct {
	name string
	caps clientCaps
	// missing says why the client cannot run on this machine ("" when it can). A
	// missing client fails its test: tests/deps.sh installs every client.
	missing func() string
	// unsupported says why the client cannot use a codec ("" when it can); such cells
	// are skipped and marked unsupported in the matrix.
	unsupported func(codec string) string
	// run creates spec.Topic (or has it created), produces spec.Records with spec.Codec
	// and consumes them back. On error it may still return what it did until then.
	run func(ctx context.Context, t *testing.T, spec *cellSpec) (*cellOutput, error)
	// cellTimeout bounds one cell, start-up to the last consumed record.
	cellTimeout time.Duration
}

// runClientMatrix runs one client's cells, one codec after another; different clients'
// matrices run in parallel, bounded by -test.parallel (GOMAXPROCS by default).
func runClientMatrix(t *testing.T, d clientDriver) {
	t.Parallel()
	if d.missing != nil {
		if why := d.missing(); why != "" {
			for _, codec := range codecs {
				results.record(d.name, codec, statusFail, "client missing: "+why)
			}
			t.Fatalf("%s is not installed: %s (run `bash tests/deps.sh`)", d.name, why)
		}
	}
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) { runCell(t, d, codec) })
	}
}

func runCell(t *testing.T, d clientDriver, codec string) {
	if d.unsupported != nil {
		if why := d.unsupported(codec); why != "" {
			results.record(d.name, codec, statusUnsupported, why)
			t.Skipf("%s cannot produce %s: %s", d.name, codec, why)
		}
	}
	spec := newCellSpec(d.name, codec, d.caps, time.Now())
	t.Logf("topic %s", spec.Topic)
	timeout := d.cellTimeout
	if timeout == 0 {
		timeout = 40 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	out, err := d.run(ctx, t, spec)
	if err != nil {
		note := firstLine(err.Error())
		// A client that failed after producing everything (kafkajs without consumer
		// groups, say) still shows whether its writes were stored right.
		if out != nil && !out.ProduceEnd.IsZero() {
			if stored := checkStored(ctx, spec, out); len(stored) > 0 {
				note += fmt.Sprintf("; what it produced is stored wrong too: %s (%d problems)", stored[0], len(stored))
				for _, p := range stored {
					t.Error(p)
				}
			} else {
				note += "; what it produced was stored intact (checked by the franz-go reference read)"
			}
		}
		results.record(d.name, codec, statusFail, note)
		t.Fatalf("%s/%s: %v", d.name, codec, err)
	}
	problems := checkCell(spec, out)
	problems = append(problems, checkTopicShape(ctx, spec.Topic)...)
	problems = append(problems, checkStored(ctx, spec, out)...)
	if len(problems) == 0 {
		results.record(d.name, codec, statusPass, "")
		t.Logf("%d records produced and consumed back intact (%d acknowledgements checked)", len(spec.Records), len(out.Produced))
		return
	}
	results.record(d.name, codec, statusFail, fmt.Sprintf("%s (%d problems)", problems[0], len(problems)))
	const show = 25
	for i, p := range problems {
		if i == show {
			t.Errorf("... and %d more problems", len(problems)-show)
			break
		}
		t.Error(p)
	}
}

// checkTopicShape checks, through the suite's admin client, that the cell's topic exists
// with the partition count the client asked for.
func checkTopicShape(ctx context.Context, topic string) []string {
	details, err := target.admin.ListTopics(ctx, topic)
	if err != nil {
		return []string{fmt.Sprintf("listing topic %s: %v", topic, err)}
	}
	d, ok := details[topic]
	if !ok {
		return []string{fmt.Sprintf("topic %s not in metadata", topic)}
	}
	if d.Err != nil {
		return []string{fmt.Sprintf("topic %s metadata error: %v", topic, d.Err)}
	}
	if len(d.Partitions) != partitionCount {
		return []string{fmt.Sprintf("topic %s has %d partitions, want %d", topic, len(d.Partitions), partitionCount)}
	}
	return nil
}

// createTopicWithAdmin creates a cell's topic for clients that cannot do it themselves.
func createTopicWithAdmin(ctx context.Context, topic string) error {
	resp, err := target.admin.CreateTopic(ctx, partitionCount, 1, nil, topic)
	if err != nil {
		return fmt.Errorf("creating topic %s with kadm: %w", topic, err)
	}
	if resp.Err != nil {
		return fmt.Errorf("creating topic %s with kadm: %w", topic, resp.Err)
	}
	return nil
}

// indexOf identifies a record by its content the way the checks do: by value where it
// is non-empty (values are unique), else by key.
func (s *cellSpec) indexOf(key, value []byte) (int, bool) {
	for _, r := range s.Records {
		if len(value) > 0 {
			if string(r.Value) == string(value) {
				return r.Index, true
			}
		} else if len(r.Value) == 0 && string(r.Key) == string(key) {
			return r.Index, true
		}
	}
	return 0, false
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
