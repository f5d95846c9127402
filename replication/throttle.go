package replication

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"
)

// Replication throttles, as Kafka's leader.replication.throttled.rate and
// follower.replication.throttled.rate: one byte budget per broker for each side, spent
// only by throttled replicas that are out of the ISR. A replica is throttled while a
// reassignment adds it, so a reassignment is throttled from start to end and nothing
// has to be cleared afterwards; the topic configs leader.replication.throttled.replicas
// and follower.replication.throttled.replicas, which Kafka's reassignment tool sets,
// throttle the replicas they list as well.

// quota is a token bucket of bytes per second holding at most one second's worth. A
// read is allowed while the bucket is not empty and charged after the fact, so a large
// read overdraws it and the next ones wait: the average rate is the configured one.
type quota struct {
	rate float64 // bytes per second; +Inf: no limit

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// newQuota returns a quota of rate bytes per second; Kafka's default, MaxInt64, and
// anything negative mean no limit.
func newQuota(rate int64) *quota {
	q := &quota{rate: math.Inf(1)}
	if rate >= 0 && rate < math.MaxInt64 {
		q.rate = float64(rate)
		q.tokens = q.rate
	}
	return q
}

func (q *quota) limited() bool { return !math.IsInf(q.rate, 1) }

func (q *quota) refillLocked(now time.Time) {
	if !q.last.IsZero() && now.After(q.last) {
		q.tokens = min(q.rate, q.tokens+q.rate*now.Sub(q.last).Seconds())
	}
	q.last = now
}

// exceeded reports whether the budget is spent.
func (q *quota) exceeded(now time.Time) bool {
	if !q.limited() {
		return false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now)
	return q.tokens <= 0
}

// record charges n bytes.
func (q *quota) record(n int, now time.Time) {
	if !q.limited() || n <= 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now)
	q.tokens -= float64(n)
}

// maxThrottleWait bounds how long a throttled fetcher sleeps at once, so that a rate of
// zero or a huge overdraft does not stop it noticing changes.
const maxThrottleWait = time.Second

// wait is how long until the budget is no longer spent.
func (q *quota) wait(now time.Time) time.Duration {
	if !q.limited() {
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refillLocked(now)
	if q.tokens > 0 {
		return 0
	}
	if q.rate <= 0 {
		return maxThrottleWait
	}
	return min(maxThrottleWait, time.Duration((1-q.tokens)/q.rate*float64(time.Second)))
}

// replicaThrottled reports whether replica broker of mp is throttled on the side whose
// topic config is listConfig: it is out of the ISR and either being added by a
// reassignment or listed (as partition:broker, or "*") in the config. The leader's side
// lists the leader's broker (Kafka throttles the replicas a leader serves from), the
// follower's side the follower's.
func replicaThrottled(t *metadata.Topic, mp *metadata.Partition, replica, listed int32, listConfig string) bool {
	if slices.Contains(mp.ISR, replica) {
		return false
	}
	if slices.Contains(mp.AddingReplicas, replica) {
		return true
	}
	return throttledReplicasList(t.Configs[listConfig], mp.Index, listed)
}

// throttledReplicasList reports whether a leader/follower.replication.throttled.replicas
// value names partition:broker.
func throttledReplicasList(v string, partition, broker int32) bool {
	v = strings.TrimSpace(v)
	if v == "" {
		return false
	}
	if v == "*" {
		return true
	}
	for _, e := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(strings.TrimSpace(e), ":")
		if !ok {
			continue
		}
		pi, err1 := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		bi, err2 := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		if err1 == nil && err2 == nil && int32(pi) == partition && int32(bi) == broker {
			return true
		}
	}
	return false
}

// leaderThrottled reports whether this leader throttles what it sends follower replica
// of a partition.
func (m *Manager) leaderThrottled(topic string, index, replica int32) bool {
	if !m.leaderQuota.limited() {
		return false
	}
	im := m.Image()
	t := im.Topic(topic)
	if t == nil || index < 0 || int(index) >= len(t.Partitions) {
		return false
	}
	return replicaThrottled(t, &t.Partitions[index], replica, m.cfg.NodeID, topicconfig.LeaderReplicationThrottledReplicas)
}

// followerThrottled reports whether this broker's fetches of a partition it follows
// are throttled.
func (m *Manager) followerThrottled(t *metadata.Topic, mp *metadata.Partition) bool {
	if !m.followerQuota.limited() {
		return false
	}
	return replicaThrottled(t, mp, m.cfg.NodeID, m.cfg.NodeID, topicconfig.FollowerReplicationThrottledReplicas)
}

// replicationFactor is a partition's replication factor as Kafka counts it for
// under-replication: while a reassignment runs, the replicas it keeps and adds, not those
// it is removing (replicas is the replica count the caller sees). moving reports a
// reassignment in progress.
func (m *Manager) replicationFactor(topic string, index int32, replicas int) (rf int, moving bool) {
	mp := m.Image().Partition(topic, index)
	if mp == nil || !mp.Reassigning() {
		return replicas, false
	}
	return max(replicas-len(mp.RemovingReplicas), 0), true
}
