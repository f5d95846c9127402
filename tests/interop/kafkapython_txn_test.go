package interop

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaPythonTransactionalTopic: franz-go commits, aborts and commits again
// transactions on two partitions. kafka-python's default consumer (read_uncommitted: the
// Debian 2.0.2 has no isolation_level, and shows control records as it does against
// Kafka) sees every data record and one marker per transaction and partition; where
// kafka-python is new enough for read_committed, that consumer sees exactly the
// committed records.
func TestKafkaPythonTransactionalTopic(t *testing.T) {
	if msg := pythonModuleMissing("kafka")(); msg != "" {
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("kp-txn-%d", time.Now().UnixNano())
	if _, err := target.admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(target.seeds...), kgo.TransactionalID(topic+"-txn"), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var want, all []string
	txn := func(prefix string, n int, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 2), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce %s: %v", v, err)
			}
			all = append(all, v)
			if commit {
				want = append(want, v)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn("first", 6, kgo.TryCommit)
	txn("aborted", 4, kgo.TryAbort)
	txn("second", 6, kgo.TryCommit)

	script, err := filepath.Abs(filepath.Join("python", "kafkapython_read_committed.py"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, debianPython, "-u", "-B", script, target.bootstrap, topic, "2", fmt.Sprint(len(all))).CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		ReadCommitted   *[]string `json:"read_committed"`
		ReadUncommitted []string  `json:"read_uncommitted"`
		Markers         int       `json:"markers"`
	}
	if err := json.Unmarshal([]byte(lastLine(strings.TrimSpace(string(out)))), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	slices.Sort(want)
	slices.Sort(all)
	if res.ReadCommitted == nil {
		t.Log("this kafka-python has no isolation_level; read_committed not checked")
	} else if !slices.Equal(*res.ReadCommitted, want) {
		t.Errorf("read_committed saw %v, want %v", *res.ReadCommitted, want)
	}
	if res.ReadCommitted == nil && res.Markers != 6 {
		t.Errorf("kafka-python saw %d markers, want 6 (3 transactions on 2 partitions)", res.Markers)
	}
	if !slices.Equal(res.ReadUncommitted, all) {
		t.Errorf("read_uncommitted saw %v, want %v", res.ReadUncommitted, all)
	}
}
