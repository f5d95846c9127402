package replication

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Consumer offset sync (issue 29): for a link with consumer.offset.sync.enable, one
// destination broker (the lowest-numbered unfenced one, so that exactly one does once
// the brokers agree on the image) copies, every consumer.offset.sync.ms, the committed
// offsets of the source's groups that consumer.offset.group.filters selects, for the
// link's active mirror topics. A mirror's offsets are the source's, so they are copied
// as they are, leader epoch included, capped at the destination's end so that a group
// that moves over never starts past what the mirror holds. The commits are Kafka's
// admin commits (generation -1, no member), which the destination's group coordinator
// refuses for a group with members (UNKNOWN_MEMBER_ID): a group active on the
// destination is never overwritten.

// offsetSyncer syncs one link's group offsets.
type offsetSyncer struct {
	m      *Manager
	link   *metadata.ClusterLink
	src    LinkConn
	dst    LinkConn
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	lastSync time.Time // the end of the last complete pass
}

// dialSelf is the default Config.DialSelf: a franz-go client of this broker's own
// cluster through its advertised listener, with the inter-broker options.
func (m *Manager) dialSelf() (LinkConn, error) {
	if m.cfg.DialSelf != nil {
		return m.cfg.DialSelf()
	}
	b, ok := m.Image().Brokers[m.cfg.NodeID]
	if !ok {
		return nil, errors.New("this broker is not registered")
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))),
		kgo.ClientID("shale-offset-sync"), kgo.RetryTimeout(10 * time.Second)}, m.cfg.FetcherOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return kgoLinkConn{cl: cl}, nil
}

// syncsOffsets reports whether this broker syncs link's offsets under im.
func (m *Manager) syncsOffsets(im *metadata.Image, l *metadata.ClusterLink) bool {
	if l.Config(metadata.LinkOffsetSyncEnable) != "true" {
		return false
	}
	lowest := int32(-1)
	for id, b := range im.Brokers {
		if !b.Fenced && (lowest < 0 || id < lowest) {
			lowest = id
		}
	}
	return lowest == m.cfg.NodeID
}

func startOffsetSyncer(m *Manager, l *metadata.ClusterLink, src, dst LinkConn) *offsetSyncer {
	ctx, cancel := context.WithCancel(m.ctx)
	s := &offsetSyncer{m: m, link: l, src: src, dst: dst, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.run(ctx)
	}()
	return s
}

func (s *offsetSyncer) stop() {
	s.cancel()
	<-s.done
	s.src.Close()
	s.dst.Close()
}

// age is the time since the last complete pass (-1: none yet).
func (s *offsetSyncer) age() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastSync.IsZero() {
		return -1
	}
	return s.m.now().Sub(s.lastSync)
}

func (s *offsetSyncer) run(ctx context.Context) {
	interval := time.Duration(s.link.ConfigInt(metadata.LinkOffsetSyncMs)) * time.Millisecond
	if interval <= 0 {
		interval = 30 * time.Second
	}
	var lastErr string
	for {
		if err := s.syncOnce(ctx); err != nil {
			if msg := err.Error(); msg != lastErr && ctx.Err() == nil {
				s.m.lg.Warn("consumer offset sync failed", "link", s.link.Name, "err", err)
				lastErr = msg
			}
		} else {
			lastErr = ""
			s.mu.Lock()
			s.lastSync = s.m.now()
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.m.after(interval):
		}
	}
}

// syncOnce copies every selected group's offsets once.
func (s *offsetSyncer) syncOnce(ctx context.Context) error {
	filters, err := metadata.ParseGroupFilters(s.link.Config(metadata.LinkOffsetGroupFilters))
	if err != nil {
		return err
	}
	im := s.m.Image()
	topics := map[string]string{} // source topic -> mirror topic
	for _, mt := range im.Mirrors {
		if mt.Link == s.link.Name && mt.Active() {
			topics[mt.SourceTopic] = mt.Topic
		}
	}
	if len(topics) == 0 || len(filters) == 0 {
		return nil
	}
	resp, err := s.src.Request(ctx, -1, kmsg.NewPtrListGroupsRequest())
	if err != nil {
		return fmt.Errorf("listing the source's groups: %w", err)
	}
	lg := resp.(*kmsg.ListGroupsResponse)
	if err := kerr.ErrorForCode(lg.ErrorCode); err != nil {
		return fmt.Errorf("listing the source's groups: %w", err)
	}
	ends, err := s.destinationEnds(ctx, im, topics)
	if err != nil {
		return err
	}
	var errs []error
	for _, g := range lg.Groups {
		if !metadata.MatchGroup(filters, g.Group) {
			continue
		}
		if err := s.syncGroup(ctx, g.Group, topics, ends); err != nil {
			errs = append(errs, fmt.Errorf("group %q: %w", g.Group, err))
		}
	}
	return errors.Join(errs...)
}

type topicPartition struct {
	topic     string
	partition int32
}

// destinationEnds lists the mirror partitions' high watermarks on the destination.
func (s *offsetSyncer) destinationEnds(ctx context.Context, im *metadata.Image, topics map[string]string) (map[topicPartition]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	for _, dt := range topics {
		t := im.Topic(dt)
		if t == nil {
			continue
		}
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = dt
		for i := range t.Partitions {
			p := kmsg.NewListOffsetsRequestTopicPartition()
			p.Partition, p.Timestamp = int32(i), -1
			rt.Partitions = append(rt.Partitions, p)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := s.dst.Request(ctx, -1, req)
	if err != nil {
		return nil, fmt.Errorf("listing the mirrors' end offsets: %w", err)
	}
	out := map[topicPartition]int64{}
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 {
				out[topicPartition{t.Topic, p.Partition}] = p.Offset
			}
		}
	}
	return out, nil
}

// committed is a group's committed offset of one partition.
type committed struct {
	offset int64
	epoch  int32
	meta   *string
}

func fetchOffsets(ctx context.Context, conn LinkConn, group string) (map[topicPartition]committed, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	resp, err := conn.Request(ctx, -1, req)
	if err != nil {
		return nil, err
	}
	of := resp.(*kmsg.OffsetFetchResponse)
	out := map[topicPartition]committed{}
	add := func(topic string, p int32, off int64, epoch int32, meta *string, code int16) {
		if code == 0 && off >= 0 {
			out[topicPartition{topic, p}] = committed{offset: off, epoch: epoch, meta: meta}
		}
	}
	if len(of.Groups) > 0 {
		g := of.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
			}
		}
		return out, nil
	}
	if err := kerr.ErrorForCode(of.ErrorCode); err != nil {
		return nil, err
	}
	for _, t := range of.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode)
		}
	}
	return out, nil
}

// syncGroup copies one group's offsets of the mirrored topics, where they differ.
func (s *offsetSyncer) syncGroup(ctx context.Context, group string, topics map[string]string, ends map[topicPartition]int64) error {
	srcOffs, err := fetchOffsets(ctx, s.src, group)
	if err != nil {
		return fmt.Errorf("source offsets: %w", err)
	}
	dstOffs, err := fetchOffsets(ctx, s.dst, group)
	if err != nil {
		return fmt.Errorf("destination offsets: %w", err)
	}
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation, req.MemberID = group, -1, ""
	byTopic := map[string]*kmsg.OffsetCommitRequestTopic{}
	for tp, c := range srcOffs {
		dt, ok := topics[tp.topic]
		if !ok {
			continue
		}
		end, ok := ends[topicPartition{dt, tp.partition}]
		if !ok {
			continue
		}
		off := min(c.offset, end)
		if have, ok := dstOffs[topicPartition{dt, tp.partition}]; ok && have.offset == off {
			continue
		}
		rt := byTopic[dt]
		if rt == nil {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = dt
			rt = &t
			byTopic[dt] = rt
		}
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = tp.partition, off, c.epoch, c.meta
		if off < c.offset {
			p.LeaderEpoch = -1 // capped: the source's epoch is not that of this offset
		}
		rt.Partitions = append(rt.Partitions, p)
	}
	if len(byTopic) == 0 {
		return nil
	}
	for _, rt := range byTopic {
		req.Topics = append(req.Topics, *rt)
	}
	resp, err := s.dst.Request(ctx, -1, req)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			switch err := kerr.ErrorForCode(p.ErrorCode); {
			case err == nil:
			case errors.Is(err, kerr.UnknownMemberID), errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.IllegalGeneration):
				// The group has members on the destination: it is not overwritten.
				return nil
			default:
				return fmt.Errorf("commit %s-%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
