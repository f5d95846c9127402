package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicSpec is a topic to create. Partitions and ReplicationFactor of -1 (or 0) ask for
// the broker's num.partitions and default.replication.factor.
type TopicSpec struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           map[string]string
}

// Topic describes an existing topic.
type Topic struct {
	Name       string
	ID         string // URL-safe base64 without padding, as Kafka prints it; AAAAAAAAAAAAAAAAAAAAAA from brokers without topic ids
	Internal   bool
	Partitions []Partition // sorted by partition number
	// Configs are the topic's effective configs, sorted by name; filled by DescribeTopics.
	Configs []Config
}

// ReplicationFactor is the replica count of partition 0 (Kafka's tools report the same).
func (t Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// Partition is one partition's leadership as Metadata reports it.
type Partition struct {
	Partition       int32
	Leader          int32 // -1 without a leader
	LeaderEpoch     int32
	Replicas        []int32
	ISR             []int32
	OfflineReplicas []int32
	Err             error // e.g. LEADER_NOT_AVAILABLE
	// LeaderLive reports whether the leader is one of the brokers the same Metadata
	// response lists (the live ones).
	LeaderLive bool
}

// UnderReplicated reports whether the ISR is smaller than the replica set, as
// kafka-topics.sh --under-replicated-partitions does.
func (p Partition) UnderReplicated() bool { return len(p.ISR) < len(p.Replicas) }

// Unavailable reports whether the partition has no leader, or a leader that is not a
// live broker, as kafka-topics.sh --unavailable-partitions does.
func (p Partition) Unavailable() bool { return p.Leader < 0 || !p.LeaderLive }

// Config is one effective config of a topic.
type Config struct {
	Name      string
	Value     string
	IsNull    bool // the broker reported no value (sensitive, or unset with no default)
	Sensitive bool
	Source    kmsg.ConfigSource
}

// IsDefault reports whether the value is Kafka's default rather than set for the topic
// or by the broker's configuration.
func (c Config) IsDefault() bool { return c.Source == kmsg.ConfigSourceDefaultConfig }

// responseError joins a per-resource error code with the broker's message.
func responseError(op, name string, err error, msg string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", op, name, withMessage(err, msg))
}

// withMessage joins a Kafka error with the broker's error_message, each part once. A
// message that starts with the code's own name and description (as Shale's brokers sent
// before they sent the detail alone) is cut to the rest.
func withMessage(err error, msg string) error {
	if err == nil || msg == "" {
		return err
	}
	msg = strings.TrimPrefix(msg, err.Error()+": ")
	if strings.Contains(err.Error(), msg) {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// CreateTopic creates a topic and returns the partition count and replication factor
// the broker chose (0 from brokers older than Kafka 2.4, which do not say).
func (c *Client) CreateTopic(ctx context.Context, spec TopicSpec) (partitions int32, replicationFactor int16, err error) {
	if spec.Name == "" {
		return 0, 0, errors.New("create topic: no topic name")
	}
	p, rf := spec.Partitions, spec.ReplicationFactor
	if p == 0 {
		p = -1
	}
	if rf == 0 {
		rf = -1
	}
	var configs map[string]*string
	if len(spec.Configs) > 0 {
		configs = make(map[string]*string, len(spec.Configs))
		for k, v := range spec.Configs {
			configs[k] = kadm.StringPtr(v)
		}
	}
	resps, err := c.adm.CreateTopics(ctx, p, rf, configs, spec.Name)
	if err != nil {
		return 0, 0, fmt.Errorf("create topic %s: %w", spec.Name, err)
	}
	r, ok := resps[spec.Name]
	if !ok {
		return 0, 0, fmt.Errorf("create topic %s: the broker's response does not mention it", spec.Name)
	}
	if err := responseError("create topic", spec.Name, r.Err, r.ErrMessage); err != nil {
		return 0, 0, err
	}
	return r.NumPartitions, r.ReplicationFactor, nil
}

// metadata asks the cluster directly for topic metadata (all topics when names is
// empty). kadm answers from franz-go's metadata cache, which may be seconds old: a
// listing right after a delete would still show the topic.
func (c *Client) metadata(ctx context.Context, names []string) ([]Topic, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, err
	}
	live := make(map[int32]bool, len(resp.Brokers))
	for _, b := range resp.Brokers {
		live[b.NodeID] = true
	}
	var topics []Topic
	for _, rt := range resp.Topics {
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return nil, fmt.Errorf("topic %s: %w", name, err)
		}
		t := Topic{Name: name, ID: base64.RawURLEncoding.EncodeToString(rt.TopicID[:]), Internal: rt.IsInternal}
		for _, p := range rt.Partitions {
			t.Partitions = append(t.Partitions, Partition{
				Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
				Replicas: p.Replicas, ISR: p.ISR, OfflineReplicas: p.OfflineReplicas,
				Err: kerr.ErrorForCode(p.ErrorCode), LeaderLive: p.Leader >= 0 && live[p.Leader],
			})
		}
		slices.SortFunc(t.Partitions, func(a, b Partition) int { return int(a.Partition - b.Partition) })
		topics = append(topics, t)
	}
	slices.SortFunc(topics, func(a, b Topic) int { return strings.Compare(a.Name, b.Name) })
	return topics, nil
}

// ListTopics returns the names of the cluster's topics, sorted; internal topics
// (__consumer_offsets, ...) only when internal is set.
func (c *Client) ListTopics(ctx context.Context, internal bool) ([]string, error) {
	topics, err := c.metadata(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	var names []string
	for _, t := range topics {
		if internal || !t.Internal {
			names = append(names, t.Name)
		}
	}
	return names, nil
}

// DescribeTopics describes the named topics, or every non-internal topic when none are
// named, with partitions and configs, sorted by name. A named topic that does not exist
// is an error wrapping kerr.UnknownTopicOrPartition.
func (c *Client) DescribeTopics(ctx context.Context, names ...string) ([]Topic, error) {
	topics, err := c.metadata(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("describe topics: %w", err)
	}
	if len(names) == 0 {
		topics = slices.DeleteFunc(topics, func(t Topic) bool { return t.Internal })
	}
	if len(topics) == 0 {
		return nil, nil
	}
	topicNames := make([]string, len(topics))
	for i, t := range topics {
		topicNames[i] = t.Name
	}
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topicNames...)
	if err != nil {
		return nil, fmt.Errorf("describe topic configs: %w", err)
	}
	for _, rc := range rcs {
		if err := responseError("describe configs of topic", rc.Name, rc.Err, rc.ErrMessage); err != nil {
			return nil, err
		}
		i := slices.IndexFunc(topics, func(t Topic) bool { return t.Name == rc.Name })
		if i < 0 {
			continue
		}
		for _, cfg := range rc.Configs {
			topics[i].Configs = append(topics[i].Configs, Config{
				Name: cfg.Key, Value: cfg.MaybeValue(), IsNull: cfg.Value == nil,
				Sensitive: cfg.Sensitive, Source: cfg.Source,
			})
		}
		slices.SortFunc(topics[i].Configs, func(a, b Config) int { return strings.Compare(a.Name, b.Name) })
	}
	return topics, nil
}

// DeleteTopics deletes topics; the error joins every topic that could not be deleted.
func (c *Client) DeleteTopics(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return errors.New("delete topics: no topic named")
	}
	resps, err := c.adm.DeleteTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	var errs []error
	for _, name := range names {
		r, ok := resps[name]
		if !ok {
			errs = append(errs, fmt.Errorf("delete topic %s: the broker's response does not mention it", name))
			continue
		}
		errs = append(errs, responseError("delete topic", name, r.Err, r.ErrMessage))
	}
	return errors.Join(errs...)
}

// AlterTopicConfigs changes a topic's configs incrementally (IncrementalAlterConfigs):
// set gives new values, remove returns configs to their defaults; others stay as they are.
func (c *Client) AlterTopicConfigs(ctx context.Context, topic string, set map[string]string, remove []string) error {
	var alters []kadm.AlterConfig
	for _, k := range slices.Sorted(maps.Keys(set)) {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(set[k])})
	}
	for _, k := range remove {
		if _, dup := set[k]; dup {
			return fmt.Errorf("alter configs of topic %s: %s is both set and deleted", topic, k)
		}
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return fmt.Errorf("alter configs of topic %s: nothing to change", topic)
	}
	resps, err := c.adm.AlterTopicConfigs(ctx, alters, topic)
	if err != nil {
		return fmt.Errorf("alter configs of topic %s: %w", topic, err)
	}
	r, err := resps.On(topic, nil)
	if err != nil {
		return fmt.Errorf("alter configs of topic %s: %w", topic, err)
	}
	return responseError("alter configs of topic", topic, r.Err, r.ErrMessage)
}

// SetPartitions raises a topic's partition count to n (CreatePartitions); Kafka never
// lowers it.
func (c *Client) SetPartitions(ctx context.Context, topic string, n int) error {
	resps, err := c.adm.UpdatePartitions(ctx, n, topic)
	if err != nil {
		return fmt.Errorf("set partitions of topic %s: %w", topic, err)
	}
	r, ok := resps[topic]
	if !ok {
		return fmt.Errorf("set partitions of topic %s: the broker's response does not mention it", topic)
	}
	return responseError("set partitions of topic", topic, r.Err, r.ErrMessage)
}
