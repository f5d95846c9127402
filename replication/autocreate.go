package replication

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

const (
	// autoCreateTimeout bounds one background creation.
	autoCreateTimeout = 30 * time.Second
	// autoCreateErrorTTL is how long a failed creation's error is reported to the
	// clients that asked for the topic.
	autoCreateErrorTTL = time.Minute
)

// autoCreator remembers the auto-creations under way and the last failure of each
// topic, so that a client asking again learns why its topic does not appear.
type autoCreator struct {
	mu       sync.Mutex
	inFlight map[string]bool
	failed   map[string]autoCreateFailure
}

type autoCreateFailure struct {
	err error
	at  time.Time
}

// AutoCreateTopics starts creating, in the background, the named topics that do not
// exist, with partitions and replication factor (-1: the controller's defaults), as
// Kafka's auto.create.topics.enable does: the Metadata request that asked is answered
// from the image it started with (LEADER_NOT_AVAILABLE for these topics), and the
// client asks again. It returns the error of each topic's last failed creation within
// the past minute; that topic is tried again all the same, in case the cause is gone.
// Names that are not valid topic names are left for the caller to report.
func (m *Manager) AutoCreateTopics(names []string, partitions int32, rf int16) map[string]error {
	ac := &m.autoCreate
	now := time.Now()
	var specs []metadata.TopicSpec
	var failed map[string]error
	ac.mu.Lock()
	for name, f := range ac.failed {
		if now.Sub(f.at) > autoCreateErrorTTL {
			delete(ac.failed, name)
		}
	}
	for _, n := range names {
		if metadata.ValidateTopicName(n) != nil || m.Image().Topic(n) != nil {
			continue
		}
		if f, ok := ac.failed[n]; ok {
			if failed == nil {
				failed = map[string]error{}
			}
			failed[n] = f.err
		}
		if ac.inFlight[n] {
			continue
		}
		if ac.inFlight == nil {
			ac.inFlight = map[string]bool{}
		}
		ac.inFlight[n] = true
		specs = append(specs, metadata.TopicSpec{Name: n, NumPartitions: partitions, ReplicationFactor: rf})
	}
	ac.mu.Unlock()
	if len(specs) == 0 {
		return failed
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		m.autoCreateDone(specs, nil)
		return failed
	}
	m.wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, autoCreateTimeout)
		defer cancel()
		m.autoCreateDone(specs, m.store.CreateTopics(ctx, specs, false))
	}()
	return failed
}

// autoCreateDone records the outcome of a background creation.
func (m *Manager) autoCreateDone(specs []metadata.TopicSpec, results []metadata.TopicResult) {
	ac := &m.autoCreate
	ac.mu.Lock()
	defer ac.mu.Unlock()
	for _, s := range specs {
		delete(ac.inFlight, s.Name)
	}
	for _, res := range results {
		switch {
		case res.Err == nil:
			delete(ac.failed, res.Name)
			m.lg.Info("auto-created topic", "topic", res.Name)
		case errors.Is(res.Err, kerr.TopicAlreadyExists):
			delete(ac.failed, res.Name)
		default:
			if ac.failed == nil {
				ac.failed = map[string]autoCreateFailure{}
			}
			ac.failed[res.Name] = autoCreateFailure{err: res.Err, at: time.Now()}
			m.lg.Warn("auto-creating topic failed", "topic", res.Name, "err", res.Err)
		}
	}
}
