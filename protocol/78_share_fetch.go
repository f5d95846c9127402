package protocol

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication/share"
)

// handleShareFetch is KIP-932's ShareFetch: piggybacked acknowledgements first (each
// answered once committed), then records acquired for the member from every partition of
// its share session, long-polling up to MaxWaitMillis when there are none.
func (s *Server) handleShareFetch(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.ShareFetchRequest)
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
	resp.AcquisitionLockTimeoutMillis = int32(s.deps.Shares.LockDuration().Milliseconds())
	fail := func(err *kerr.Error) Result {
		resp.ErrorCode = err.Code
		return Result{Resp: resp}
	}
	group, member, code := s.shareRequester(r, req.GroupID, req.MemberID)
	if code != nil {
		return fail(code)
	}
	renew := req.Version >= 2 && req.IsRenewAck
	var acks []*ackPart
	var named []sharePartKey
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			k := sharePartKey{t.TopicID, p.Partition}
			named = append(named, k)
			if len(p.AcknowledgementBatches) > 0 {
				acks = append(acks, &ackPart{key: k, batches: ackBatchesOf(p.AcknowledgementBatches,
					func(b *kmsg.ShareFetchRequestTopicPartitionAcknowledgementBatch) (int64, int64, []int8) {
						return b.FirstOffset, b.LastOffset, b.AcknowledgeTypes
					})})
			}
		}
	}
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0 || len(acks) != len(named)) {
		// KIP-1222: a renewal fetches nothing.
		return fail(kerr.InvalidRequest)
	}
	var forgotten []sharePartKey
	for _, f := range req.ForgottenTopicsData {
		for _, p := range f.Partitions {
			forgotten = append(forgotten, sharePartKey{f.TopicID, p})
		}
	}
	key := shareSessionKey{group, member}
	var parts []sharePartKey
	switch epoch := req.ShareSessionEpoch; {
	case epoch == -1:
		closed, err := s.shareSessions.close(key)
		if err != nil {
			return fail(err.(*kerr.Error))
		}
		s.acknowledge(ctx, r, group, member, acks, renew)
		s.deps.Shares.ReleaseMember(ctx, shareKeys(s.image(), group, closed), member)
		s.addShareAcks(resp, acks)
		return Result{Resp: resp}
	case epoch == 0:
		if len(acks) > 0 {
			// Acknowledgements belong to a session; a new one has acquired nothing.
			return fail(kerr.InvalidRequest)
		}
		if err := s.shareSessions.open(key, named, r.conn); err != nil {
			return fail(err.(*kerr.Error))
		}
		parts = named
		// A state an admin replaced while the group was empty is read again.
		s.deps.Shares.Refresh(shareKeys(s.image(), group, parts))
	default:
		var err error
		if parts, err = s.shareSessions.advance(key, epoch, named, forgotten); err != nil {
			return fail(err.(*kerr.Error))
		}
	}
	s.acknowledge(ctx, r, group, member, acks, renew)
	if renew {
		s.addShareAcks(resp, acks)
		return Result{Resp: resp}
	}

	maxRecords := int(req.MaxRecords)
	if req.Version < 1 || maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 {
		maxBytes = defaultFetchMaxBytes
	}
	wait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var out []sharePartResult
	for {
		var waits []<-chan struct{}
		var got, errs bool
		out, waits, got, errs = s.acquireShare(ctx, r, group, member, parts, maxRecords, maxBytes)
		if got || errs || wait <= 0 || len(waits) == 0 || ctx.Err() != nil {
			break
		}
		if !waitAny(ctx, waits, deadline.C) {
			break
		}
	}
	s.fillShareFetch(r, resp, out, acks, named)
	return Result{Resp: resp}
}

type sharePartResult struct {
	key     sharePartKey
	fetched share.Fetched
	code    int16
	leader  *metadata.Partition
}

// acquireShare acquires records from every session partition once. got says records
// were acquired, errs that a partition failed. Acquired records are locked, so they are
// returned however few: MinBytes only matters while there are none.
func (s *Server) acquireShare(ctx context.Context, r *Request, group, member string, parts []sharePartKey, maxRecords, maxBytes int) ([]sharePartResult, []<-chan struct{}, bool, bool) {
	im := s.image()
	out := make([]sharePartResult, 0, len(parts))
	var waits []<-chan struct{}
	var errs bool
	total := 0
	for _, p := range parts {
		res := sharePartResult{key: p}
		t := topicByID(im, p.topicID)
		switch {
		case t == nil:
			res.code = kerr.UnknownTopicID.Code
		case !s.allowed(r, opRead, resTopic, t.Name):
			res.code = errTopicDenied.Code
		default:
			if maxRecords <= 0 || maxBytes <= 0 {
				break
			}
			f, err := s.deps.Shares.Acquire(ctx, share.Key{Group: group, Topic: t.Name, Partition: p.partition}, member, maxRecords, maxBytes)
			if err != nil {
				res.code = shareErrorCode(err)
				if errors.Is(err, kerr.NotLeaderForPartition) || errors.Is(err, kerr.FencedLeaderEpoch) {
					res.leader = im.Partition(t.Name, p.partition)
				}
				break
			}
			res.fetched = f
			waits = append(waits, f.Wait...)
			for _, rg := range f.Ranges {
				maxRecords -= int(rg.Last - rg.First + 1)
			}
			maxBytes -= len(f.Records)
			total += len(f.Records)
		}
		if res.code != 0 {
			errs = true
		}
		out = append(out, res)
	}
	return out, waits, total > 0, errs
}

// fillShareFetch builds the response: every partition with records, an error or
// acknowledgements, and every partition the request named.
func (s *Server) fillShareFetch(r *Request, resp *kmsg.ShareFetchResponse, out []sharePartResult, acks []*ackPart, named []sharePartKey) {
	var order []sharePartKey
	seen := map[sharePartKey]bool{}
	add := func(k sharePartKey) {
		if !seen[k] {
			seen[k] = true
			order = append(order, k)
		}
	}
	for _, o := range out {
		if o.code != 0 || len(o.fetched.Ranges) > 0 {
			add(o.key)
		}
	}
	for _, a := range acks {
		add(a.key)
	}
	for _, k := range named {
		add(k)
	}
	topicIdx := map[[16]byte]int{}
	for _, k := range order {
		ti, ok := topicIdx[k.topicID]
		if !ok {
			ti = len(resp.Topics)
			topicIdx[k.topicID] = ti
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = k.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = k.partition
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
	idx := make(map[sharePartKey]*kmsg.ShareFetchResponseTopicPartition, len(order))
	for ti := range resp.Topics {
		t := &resp.Topics[ti]
		for pi := range t.Partitions {
			idx[sharePartKey{t.TopicID, t.Partitions[pi].Partition}] = &t.Partitions[pi]
		}
	}
	var hints bool
	setLeader := func(p *kmsg.ShareFetchResponseTopicPartition, l *metadata.Partition) {
		if l != nil && l.Leader >= 0 {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = l.Leader, l.LeaderEpoch
			hints = true
		}
	}
	for _, o := range out {
		p := idx[o.key]
		if p == nil {
			continue
		}
		p.ErrorCode = o.code
		setLeader(p, o.leader)
		if len(o.fetched.Ranges) > 0 {
			p.Records = o.fetched.Records
			for _, rg := range o.fetched.Ranges {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = rg.First, rg.Last, rg.Count
				p.AcquiredRecords = append(p.AcquiredRecords, ar)
			}
		}
	}
	for _, a := range acks {
		p := idx[a.key]
		p.AcknowledgeErrorCode = a.code
		if p.ErrorCode == 0 {
			setLeader(p, a.leader)
		}
	}
	if hints {
		for _, b := range liveBrokers(s.image(), r.Listener) {
			ne := kmsg.NewShareFetchResponseNodeEndpoint()
			ne.NodeID, ne.Host, ne.Port, ne.Rack = b.ID, b.Host, b.Port, rackOf(b)
			resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
		}
	}
}

// addShareAcks answers only acknowledgements (a closing or renewing ShareFetch).
func (s *Server) addShareAcks(resp *kmsg.ShareFetchResponse, acks []*ackPart) {
	topicIdx := map[[16]byte]int{}
	for _, a := range acks {
		ti, ok := topicIdx[a.key.topicID]
		if !ok {
			ti = len(resp.Topics)
			topicIdx[a.key.topicID] = ti
			t := kmsg.NewShareFetchResponseTopic()
			t.TopicID = a.key.topicID
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewShareFetchResponseTopicPartition()
		p.Partition = a.key.partition
		p.AcknowledgeErrorCode = a.code
		p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = -1, -1
		if a.leader != nil && a.leader.Leader >= 0 {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = a.leader.Leader, a.leader.LeaderEpoch
		}
		resp.Topics[ti].Partitions = append(resp.Topics[ti].Partitions, p)
	}
}

// shareFetchAPI: KIP-932; v1 adds MaxRecords and BatchSize (KIP-1206), v2 lock renewal
// (KIP-1222). Served by the share-partition leader.
var shareFetchAPI = api{key: kmsg.ShareFetch, min: 0, max: 2, handle: (*Server).handleShareFetch, needs: needShares}
