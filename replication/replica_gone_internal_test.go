package replication

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/metadata"
)

// A log closed under a request (its topic deleted concurrently) is answered as Kafka
// answers for a replica that is gone, not as a failed disk.
func TestReplicaGoneMapsClosedLogs(t *testing.T) {
	m := &Manager{}
	m.applied.Store(&metadata.Image{Topics: map[string]*metadata.Topic{
		"kept": {Name: "kept", Partitions: []metadata.Partition{{Topic: "kept", Index: 0, Leader: 2}}},
	}})
	closed := fmt.Errorf("read: %w: /data/x-0", shalelog.ErrClosed)
	for _, c := range []struct {
		topic string
		err   error
		want  error
	}{
		{"deleted", closed, kerr.UnknownTopicOrPartition},
		{"kept", closed, kerr.NotLeaderForPartition},
	} {
		got := m.ReplicaGone(c.topic, 0, c.err)
		if !errors.Is(got, c.want) || !errors.Is(got, shalelog.ErrClosed) {
			t.Errorf("%s: %v, want %v", c.topic, got, c.want)
		}
	}
	other := fmt.Errorf("%w: disk full", shalelog.ErrStorage)
	if got := m.ReplicaGone("kept", 0, other); got != other {
		t.Errorf("a storage error became %v", got)
	}
}
