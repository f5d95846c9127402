// Package memstore is a metadata.Store for one broker without a controller quorum: the
// broker leads every partition, and state lives in memory, optionally saved to a JSON
// file. Protocol and broker tests use it to run without Raft; production nodes use the
// controller package.
package memstore

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/internal/topicconfig"
)

// Config configures a Store.
type Config struct {
	Broker metadata.Broker
	// Path, when set, is a JSON file the state is saved to after every change.
	Path string
	// DefaultPartitions is num.partitions (default 1).
	DefaultPartitions int32
}

// Store is a single-broker metadata.Store.
type Store struct {
	cfg Config

	mu       sync.Mutex
	image    *metadata.Image
	offsets  map[string]map[string]map[int32]metadata.CommittedOffset
	nextPID  int64
	watchers []chan *metadata.Image
	closed   bool
}

type persisted struct {
	ClusterID string
	Offset    uint64
	Topics    map[string]*metadata.Topic
	Offsets   map[string]map[string]map[int32]metadata.CommittedOffset
	NextPID   int64
}

// New opens (or starts) the store.
func New(cfg Config) (*Store, error) {
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	s := &Store{cfg: cfg, offsets: map[string]map[string]map[int32]metadata.CommittedOffset{}}
	p := persisted{ClusterID: randomClusterID(), Topics: map[string]*metadata.Topic{}}
	if cfg.Path != "" {
		b, err := os.ReadFile(cfg.Path)
		switch {
		case err == nil:
			if err := json.Unmarshal(b, &p); err != nil {
				return nil, fmt.Errorf("read metadata %s: %w", cfg.Path, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("read metadata: %w", err)
		}
	}
	if p.Offsets != nil {
		s.offsets = p.Offsets
	}
	s.nextPID = p.NextPID
	b := cfg.Broker
	b.Epoch = 1
	s.image = &metadata.Image{
		Offset:       p.Offset,
		ClusterID:    p.ClusterID,
		ControllerID: b.ID,
		Brokers:      map[int32]metadata.Broker{b.ID: b},
		Topics:       p.Topics,
	}
	return s, nil
}

func randomClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return fmt.Sprintf("%x", b[:])
}

// Current implements metadata.Store.
func (s *Store) Current() *metadata.Image {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.image
}

// Watch implements metadata.Store.
func (s *Store) Watch(ctx context.Context) <-chan *metadata.Image {
	ch := make(chan *metadata.Image, 1)
	s.mu.Lock()
	ch <- s.image
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	out := make(chan *metadata.Image)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				s.unwatch(ch)
				return
			case im, ok := <-ch:
				if !ok {
					return
				}
				select {
				case out <- im:
				case <-ctx.Done():
					s.unwatch(ch)
					return
				}
			}
		}
	}()
	return out
}

func (s *Store) unwatch(ch chan *metadata.Image) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, w := range s.watchers {
		if w == ch {
			s.watchers = slices.Delete(s.watchers, i, i+1)
			return
		}
	}
}

// LeaseValid implements metadata.Store: a lone broker always holds its lease.
func (s *Store) LeaseValid() bool { return true }

// BrokerEpoch implements metadata.Store.
func (s *Store) BrokerEpoch() int64 { return 1 }

// publish installs a modified copy of the image. Callers hold mu.
func (s *Store) publish(topics map[string]*metadata.Topic) error {
	im := *s.image
	im.Topics = topics
	im.Offset++
	s.image = &im
	for _, w := range s.watchers {
		select {
		case <-w:
		default:
		}
		w <- s.image
	}
	return s.save()
}

func (s *Store) save() error {
	if s.cfg.Path == "" {
		return nil
	}
	b, err := json.Marshal(persisted{ClusterID: s.image.ClusterID, Offset: s.image.Offset, Topics: s.image.Topics, Offsets: s.offsets, NextPID: s.nextPID})
	if err != nil {
		return fmt.Errorf("encode metadata: %w", err)
	}
	tmp := s.cfg.Path + ".tmp"
	if err := os.MkdirAll(filepath.Dir(s.cfg.Path), 0o755); err != nil {
		return fmt.Errorf("save metadata: %w", err)
	}
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("save metadata: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("save metadata: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("save metadata: %w", err)
	}
	f.Close()
	return os.Rename(tmp, s.cfg.Path)
}

func (s *Store) copyTopics() map[string]*metadata.Topic {
	out := make(map[string]*metadata.Topic, len(s.image.Topics))
	for k, v := range s.image.Topics {
		out[k] = v
	}
	return out
}

func (s *Store) newPartition(topic string, i int32) metadata.Partition {
	id := s.cfg.Broker.ID
	return metadata.Partition{Topic: topic, Index: i, Replicas: []int32{id}, ISR: []int32{id}, Leader: id}
}

// CreateTopics implements metadata.Store.
func (s *Store) CreateTopics(_ context.Context, specs []metadata.TopicSpec, validateOnly bool) []metadata.TopicResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	topics := s.copyTopics()
	out := make([]metadata.TopicResult, len(specs))
	changed := false
	for i, spec := range specs {
		out[i].Name = spec.Name
		t, err := s.buildTopic(topics, spec)
		if err != nil {
			out[i].Err = err
			continue
		}
		out[i].Topic = t
		if !validateOnly {
			topics[t.Name] = t
			changed = true
		}
	}
	if changed {
		if err := s.publish(topics); err != nil {
			for i := range out {
				if out[i].Err == nil {
					out[i].Err = err
				}
			}
		}
	}
	return out
}

func (s *Store) buildTopic(topics map[string]*metadata.Topic, spec metadata.TopicSpec) (*metadata.Topic, error) {
	if err := metadata.ValidateTopicName(spec.Name); err != nil {
		return nil, err
	}
	if topics[spec.Name] != nil {
		return nil, fmt.Errorf("%w: topic %q already exists", kerr.TopicAlreadyExists, spec.Name)
	}
	if err := topicconfig.Validate(spec.Configs); err != nil {
		return nil, err
	}
	n := spec.NumPartitions
	if len(spec.Assignments) > 0 {
		n = int32(len(spec.Assignments))
		for _, a := range spec.Assignments {
			if len(a) != 1 || a[0] != s.cfg.Broker.ID {
				return nil, fmt.Errorf("%w: replicas %v: the only broker is %d", kerr.InvalidReplicaAssignment, a, s.cfg.Broker.ID)
			}
		}
	}
	if n == -1 {
		n = s.cfg.DefaultPartitions
	}
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d partitions", kerr.InvalidPartitions, n)
	}
	if rf := spec.ReplicationFactor; rf != -1 && rf != 1 && len(spec.Assignments) == 0 {
		return nil, fmt.Errorf("%w: replication factor %d is larger than the 1 available broker", kerr.InvalidReplicationFactor, rf)
	}
	t := &metadata.Topic{Name: spec.Name, Configs: spec.Configs}
	rand.Read(t.ID[:])
	for i := int32(0); i < n; i++ {
		t.Partitions = append(t.Partitions, s.newPartition(spec.Name, i))
	}
	return t, nil
}

// DeleteTopics implements metadata.Store.
func (s *Store) DeleteTopics(_ context.Context, names []string) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	topics := s.copyTopics()
	errs := make([]error, len(names))
	for i, n := range names {
		if topics[n] == nil {
			errs[i] = fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, n)
			continue
		}
		delete(topics, n)
	}
	if err := s.publish(topics); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	return errs
}

// CreatePartitions implements metadata.Store.
func (s *Store) CreatePartitions(_ context.Context, specs []metadata.PartitionsSpec, validateOnly bool) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	topics := s.copyTopics()
	errs := make([]error, len(specs))
	for i, spec := range specs {
		t := topics[spec.Topic]
		switch {
		case t == nil:
			errs[i] = fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, spec.Topic)
		case spec.Count <= int32(len(t.Partitions)):
			errs[i] = fmt.Errorf("%w: topic has %d partitions, cannot go to %d", kerr.InvalidPartitions, len(t.Partitions), spec.Count)
		case validateOnly:
		default:
			nt := *t
			nt.Partitions = slices.Clone(t.Partitions)
			for p := int32(len(t.Partitions)); p < spec.Count; p++ {
				nt.Partitions = append(nt.Partitions, s.newPartition(t.Name, p))
			}
			topics[t.Name] = &nt
		}
	}
	if !validateOnly {
		if err := s.publish(topics); err != nil {
			return []error{err}
		}
	}
	return errs
}

// AlterTopicConfigs implements metadata.Store.
func (s *Store) AlterTopicConfigs(_ context.Context, topic string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	topics := s.copyTopics()
	t := topics[topic]
	if t == nil {
		return fmt.Errorf("%w: topic %q", kerr.UnknownTopicOrPartition, topic)
	}
	configs, err := metadata.ApplyConfigOps(t.Configs, ops, incremental)
	if err != nil {
		return err
	}
	if err := topicconfig.Validate(configs); err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	nt := *t
	nt.Configs = configs
	topics[topic] = &nt
	return s.publish(topics)
}

// AlterPartition implements metadata.Store; with one broker the ISR cannot change.
func (s *Store) AlterPartition(_ context.Context, req metadata.AlterPartitionRequest) (metadata.Partition, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.image.Partition(req.Topic, req.Partition)
	if p == nil {
		return metadata.Partition{}, kerr.UnknownTopicOrPartition
	}
	return *p, fmt.Errorf("%w: a single broker's ISR is fixed", kerr.InvalidRequest)
}

// ElectLeaders implements metadata.Store. The one broker leads every partition, so no
// election is ever needed.
func (s *Store) ElectLeaders(_ context.Context, preferred bool, partitions map[string][]int32) (map[string]map[int32]error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[int32]error{}
	set := func(topic string, idx int32, err error) {
		if out[topic] == nil {
			out[topic] = map[int32]error{}
		}
		out[topic][idx] = err
	}
	elect := func(p *metadata.Partition) error {
		switch {
		case preferred && len(p.Replicas) > 0 && p.Leader == p.Replicas[0], !preferred && p.Leader >= 0:
			return kerr.ElectionNotNeeded
		case preferred:
			return kerr.PreferredLeaderNotAvailable
		default:
			return kerr.EligibleLeadersNotAvailable
		}
	}
	if partitions == nil {
		for name, t := range s.image.Topics {
			for i := range t.Partitions {
				if err := elect(&t.Partitions[i]); !errors.Is(err, kerr.ElectionNotNeeded) {
					set(name, t.Partitions[i].Index, err)
				}
			}
		}
		return out, nil
	}
	for topic, idxs := range partitions {
		for _, idx := range idxs {
			p := s.image.Partition(topic, idx)
			if p == nil {
				set(topic, idx, kerr.UnknownTopicOrPartition)
				continue
			}
			set(topic, idx, elect(p))
		}
	}
	return out, nil
}

// AllocateProducerIDs implements metadata.Store.
func (s *Store) AllocateProducerIDs(context.Context) (int64, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.nextPID
	s.nextPID += 1000
	return first, 1000, s.save()
}

// CommitOffsets implements metadata.Store.
func (s *Store) CommitOffsets(_ context.Context, group string, offsets []metadata.CommittedOffset) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.offsets[group]
	if g == nil {
		g = map[string]map[int32]metadata.CommittedOffset{}
		s.offsets[group] = g
	}
	for _, o := range offsets {
		if g[o.Topic] == nil {
			g[o.Topic] = map[int32]metadata.CommittedOffset{}
		}
		g[o.Topic][o.Partition] = o
	}
	return s.save()
}

// FetchOffsets implements metadata.Store.
func (s *Store) FetchOffsets(_ context.Context, group string, topics map[string][]int32) ([]metadata.CommittedOffset, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []metadata.CommittedOffset
	for topic, parts := range s.offsets[group] {
		want, ok := topics[topic]
		if topics != nil && !ok {
			continue
		}
		for p, o := range parts {
			if topics == nil || want == nil || slices.Contains(want, p) {
				out = append(out, o)
			}
		}
	}
	slices.SortFunc(out, func(a, b metadata.CommittedOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return out, nil
}

// DeleteGroupOffsets implements metadata.Store.
func (s *Store) DeleteGroupOffsets(_ context.Context, group string, topics map[string][]int32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if topics == nil {
		delete(s.offsets, group)
		return s.save()
	}
	for topic, parts := range topics {
		if parts == nil {
			delete(s.offsets[group], topic)
			continue
		}
		for _, p := range parts {
			delete(s.offsets[group][topic], p)
		}
	}
	return s.save()
}

// ListOffsetGroups implements metadata.Store.
func (s *Store) ListOffsetGroups(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for g := range s.offsets {
		out = append(out, g)
	}
	slices.Sort(out)
	return out, nil
}

// Close implements metadata.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, w := range s.watchers {
		close(w)
	}
	s.watchers = nil
	return nil
}

var _ metadata.Store = (*Store)(nil)
