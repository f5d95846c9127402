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
)

// TestConfluentKafkaPythonTransactions: librdkafka's transactional producer commits and
// aborts, a read_committed consumer sees only the committed records, and
// send_offsets_to_transaction commits the group's offsets with a transaction.
func TestConfluentKafkaPythonTransactions(t *testing.T) {
	if msg := pythonModuleMissing("confluent_kafka")(); msg != "" {
		t.Skip(msg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("rdk-txn-%d", time.Now().UnixNano())
	if _, err := target.admin.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs(filepath.Join("python", "confluent_txn.py"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, debianPython, "-u", "-B", script, target.bootstrap, topic, topic+"-txn", topic+"-group").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Seen      []string         `json:"seen"`
		Committed map[string]int64 `json:"committed"`
	}
	if err := json.Unmarshal([]byte(lastLine(strings.TrimSpace(string(out)))), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("committed-%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(res.Seen, want) {
		t.Fatalf("read_committed consumer saw %v, want the 10 committed records", res.Seen)
	}
	// Each partition: 5 committed records and their marker, then 2 or 3 aborted records
	// and their marker; the consumer's position is past them all.
	if res.Committed["0"] < 6 || res.Committed["1"] < 6 {
		t.Fatalf("offsets committed with the transaction: %v", res.Committed)
	}
}
