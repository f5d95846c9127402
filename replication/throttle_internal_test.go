package replication

import (
	"math"
	"testing"
	"time"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

func TestQuotaBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuota(1000)
	if q.exceeded(now) || q.wait(now) != 0 {
		t.Fatal("a fresh quota starts with one second's budget")
	}
	q.record(1500, now) // overdrawn by 500
	if !q.exceeded(now) {
		t.Fatal("overdrawn quota not exceeded")
	}
	if w := q.wait(now); w != 501*time.Millisecond {
		t.Fatalf("wait %v", w)
	}
	if !q.exceeded(now.Add(500 * time.Millisecond)) {
		t.Fatal("budget back before the overdraft was paid off")
	}
	if q.exceeded(now.Add(600 * time.Millisecond)) {
		t.Fatal("budget not back after the overdraft was paid off")
	}
	// Idle time refills at most one second's worth.
	later := now.Add(time.Hour)
	q.record(1000, later)
	if !q.exceeded(later) {
		t.Fatal("idle time banked more than one second of budget")
	}

	for _, rate := range []int64{math.MaxInt64, -1} {
		u := newQuota(rate)
		u.record(1<<40, now)
		if u.limited() || u.exceeded(now) || u.wait(now) != 0 {
			t.Fatalf("rate %d limits", rate)
		}
	}
	z := newQuota(0)
	if !z.exceeded(now) || z.wait(now) != maxThrottleWait {
		t.Fatal("a zero rate lets traffic through")
	}
}

func TestReplicaThrottled(t *testing.T) {
	topic := func(cfg map[string]string, p metadata.Partition) (*metadata.Topic, *metadata.Partition) {
		tp := &metadata.Topic{Name: "t", Configs: cfg, Partitions: []metadata.Partition{p}}
		return tp, &tp.Partitions[0]
	}
	reassigning := metadata.Partition{Index: 0, Replicas: []int32{4, 2, 3, 1}, ISR: []int32{1, 2, 3}, Leader: 1,
		AddingReplicas: []int32{4}, RemovingReplicas: []int32{1}}
	tp, p := topic(nil, reassigning)
	if !replicaThrottled(tp, p, 4, 1, topicconfig.LeaderReplicationThrottledReplicas) {
		t.Error("replica being added not throttled")
	}
	if replicaThrottled(tp, p, 2, 1, topicconfig.LeaderReplicationThrottledReplicas) {
		t.Error("in-sync replica throttled")
	}
	// Once it joins the ISR (and so once the reassignment is done), it is not.
	joined := reassigning
	joined.ISR = []int32{1, 2, 3, 4}
	if tp, p := topic(nil, joined); replicaThrottled(tp, p, 4, 1, topicconfig.LeaderReplicationThrottledReplicas) {
		t.Error("in-sync added replica throttled")
	}
	done := metadata.Partition{Index: 0, Replicas: []int32{4, 2, 3}, ISR: []int32{2, 3}, Leader: 2}
	if tp, p := topic(nil, done); replicaThrottled(tp, p, 4, 2, topicconfig.LeaderReplicationThrottledReplicas) {
		t.Error("replica throttled with no reassignment and no config")
	}
	// Kafka's topic configs: the leader's side lists the leader's broker.
	for _, tc := range []struct {
		v    string
		want bool
	}{{"*", true}, {"0:2", true}, {" 1:2 , 0:2", true}, {"0:4", false}, {"1:2", false}, {"", false}, {"junk", false}} {
		tp, p := topic(map[string]string{topicconfig.LeaderReplicationThrottledReplicas: tc.v}, done)
		if got := replicaThrottled(tp, p, 4, 2, topicconfig.LeaderReplicationThrottledReplicas); got != tc.want {
			t.Errorf("%q: throttled %v, want %v", tc.v, got, tc.want)
		}
	}
	if err := topicconfig.ValidateOne(topicconfig.FollowerReplicationThrottledReplicas, "0:1,1:2"); err != nil {
		t.Error(err)
	}
	if err := topicconfig.ValidateOne(topicconfig.FollowerReplicationThrottledReplicas, "0-1"); err == nil {
		t.Error("malformed list accepted")
	}
}
