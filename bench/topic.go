package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// metadataWait bounds how long a new topic may take to get leaders, and how
// long offsets may stay unlistable.
const metadataWait = 30 * time.Second

type admin struct {
	cl  *kgo.Client
	adm *kadm.Client
}

func newAdmin(bootstrap []string, extra ...kgo.Opt) (*admin, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap...), kgo.ClientID("shale-bench-admin")}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &admin{cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (a *admin) close() { a.cl.Close() }

// ensureTopic creates the workload's topic if it is missing and waits until
// every partition has a leader. It returns the topic's partition count,
// which differs from the workload's if the topic already existed; note says
// so.
func (a *admin) ensureTopic(ctx context.Context, w *Workload) (partitions int32, note string, err error) {
	var configs map[string]*string
	for k, v := range w.TopicConfigs {
		if configs == nil {
			configs = map[string]*string{}
		}
		configs[k] = &v
	}
	_, err = a.adm.CreateTopic(ctx, w.Partitions, w.ReplicationFactor, configs, w.Topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, "", fmt.Errorf("create topic %q (%d partitions, rf %d, configs %v): %w", w.Topic, w.Partitions, w.ReplicationFactor, w.TopicConfigs, err)
	}
	existed := err != nil
	deadline := time.Now().Add(metadataWait)
	for {
		n, ready, lerr := a.topicReady(ctx, w.Topic)
		if lerr == nil && ready {
			if existed && n != w.Partitions {
				note = fmt.Sprintf("topic %q already existed with %d partitions (not %d); using it as it is", w.Topic, n, w.Partitions)
			}
			return n, note, nil
		}
		if time.Now().After(deadline) {
			if lerr == nil {
				lerr = errors.New("some partitions have no leader")
			}
			return 0, "", fmt.Errorf("topic %q not ready after %v: %w", w.Topic, metadataWait, lerr)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return 0, "", err
		}
	}
}

func (a *admin) topicReady(ctx context.Context, topic string) (partitions int32, ready bool, err error) {
	tds, err := a.adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, false, err
	}
	td, ok := tds[topic]
	if !ok {
		return 0, false, fmt.Errorf("topic %q missing from metadata", topic)
	}
	if td.Err != nil {
		return 0, false, td.Err
	}
	if len(td.Partitions) == 0 {
		return 0, false, nil
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return int32(len(td.Partitions)), false, p.Err
		}
	}
	return int32(len(td.Partitions)), true, nil
}

// offsets lists every partition's start (end false) or end offset.
func (a *admin) offsets(ctx context.Context, topic string, partitions int32, end bool) ([]int64, error) {
	list := a.adm.ListStartOffsets
	if end {
		list = a.adm.ListEndOffsets
	}
	deadline := time.Now().Add(metadataWait)
	for {
		out, err := a.tryOffsets(ctx, list, topic, partitions)
		if err == nil {
			return out, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("list offsets of %q: %w", topic, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

func (a *admin) tryOffsets(ctx context.Context, list func(context.Context, ...string) (kadm.ListedOffsets, error), topic string, partitions int32) ([]int64, error) {
	lo, err := list(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := lo.Error(); err != nil {
		return nil, err
	}
	out := make([]int64, partitions)
	for p := range partitions {
		o, ok := lo.Lookup(topic, p)
		if !ok || o.Offset < 0 {
			return nil, fmt.Errorf("no offset for partition %d", p)
		}
		out[p] = o.Offset
	}
	return out, nil
}

// commitStart commits offsets for a fresh group, so its consumers start
// exactly where the measurement begins.
func (a *admin) commitStart(ctx context.Context, group, topic string, offsets []int64) error {
	os := kadm.Offsets{}
	for p, off := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: int32(p), At: off, LeaderEpoch: -1})
	}
	resp, err := a.adm.CommitOffsets(ctx, group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("commit start offsets for group %q: %w", group, err)
	}
	return nil
}

// groupKeys are the requests a consumer group needs: FindCoordinator,
// OffsetCommit, OffsetFetch, JoinGroup, Heartbeat, SyncGroup.
var groupKeys = map[int16]string{10: "FindCoordinator", 8: "OffsetCommit", 9: "OffsetFetch", 11: "JoinGroup", 12: "Heartbeat", 14: "SyncGroup"}

// missingGroupAPIs names the consumer-group requests some broker does not
// advertise; empty when groups can work.
func (a *admin) missingGroupAPIs(ctx context.Context) ([]string, error) {
	vs, err := a.adm.ApiVersions(ctx)
	if err != nil {
		return nil, fmt.Errorf("api versions: %w", err)
	}
	missing := map[string]bool{}
	for _, v := range vs {
		if v.Err != nil {
			return nil, fmt.Errorf("api versions of broker %d: %w", v.NodeID, v.Err)
		}
		for key, name := range groupKeys {
			if _, ok := v.KeyMaxVersion(key); !ok {
				missing[name] = true
			}
		}
	}
	return sortedKeys(missing), nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
