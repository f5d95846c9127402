package protocol

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// fetchedPartition is one partition of an OffsetFetch answer; v0-v7 and v8+ use
// different (but same-shaped) kmsg types.
type fetchedPartition struct {
	Partition   int32
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	ErrorCode   int16
}

type fetchedTopic struct {
	Topic      string
	Partitions []fetchedPartition
}

// fetchGroupOffsets answers one group: the requested partitions (those without a
// commit at offset -1), or every committed one when topics is nil.
func (s *Server) fetchGroupOffsets(ctx context.Context, r *Request, groupID string, topics map[string][]int32, order []string, requireStable bool) ([]fetchedTopic, error) {
	if !s.allowed(r, opDescribe, resGroup, groupID) {
		return nil, errGroupDenied
	}
	// The pending offsets are read before the committed ones: a transaction that
	// completes in between has moved its offsets into the committed ones in the same
	// Raft apply, so the second read sees them. Read the other way round, the client could
	// get neither (no commit yet, and nothing pending any more).
	var pending map[string][]int32
	if requireStable && s.deps.Txn != nil {
		var err error
		if pending, err = s.deps.Txn.PendingOffsets(ctx, groupID); err != nil {
			return nil, fmt.Errorf("%w: %w", kerr.CoordinatorNotAvailable, err)
		}
	}
	fts, err := s.fetchGroupOffsetsUnchecked(ctx, groupID, topics, order)
	if err == nil {
		markUnstable(fts, pending)
	}
	return s.authorizeFetchedOffsets(r, fts, topics == nil), err
}

// markUnstable answers UNSTABLE_OFFSET_COMMIT (KIP-447's require_stable) for the
// partitions whose offsets an open transaction is about to commit: the client retries
// until the transaction ends, rather than start from an offset about to move.
func markUnstable(fts []fetchedTopic, pending map[string][]int32) {
	for i := range fts {
		for j := range fts[i].Partitions {
			fp := &fts[i].Partitions[j]
			if slices.Contains(pending[fts[i].Topic], fp.Partition) {
				fp.Offset, fp.LeaderEpoch, fp.Metadata = -1, -1, ""
				fp.ErrorCode = kerr.UnstableOffsetCommit.Code
			}
		}
	}
}

func (s *Server) fetchGroupOffsetsUnchecked(ctx context.Context, groupID string, topics map[string][]int32, order []string) ([]fetchedTopic, error) {
	offs, err := s.deps.Groups.FetchOffsets(ctx, groupID, topics)
	if err != nil {
		return nil, err
	}
	byTP := map[string]map[int32]metadata.CommittedOffset{}
	var stored []string
	for _, o := range offs {
		if byTP[o.Topic] == nil {
			byTP[o.Topic] = map[int32]metadata.CommittedOffset{}
			stored = append(stored, o.Topic)
		}
		byTP[o.Topic][o.Partition] = o
	}
	found := func(o metadata.CommittedOffset) fetchedPartition {
		return fetchedPartition{Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	}
	var out []fetchedTopic
	if topics == nil {
		for _, t := range stored { // the store returns offsets sorted by topic, partition
			ft := fetchedTopic{Topic: t}
			for _, o := range offs {
				if o.Topic == t {
					ft.Partitions = append(ft.Partitions, found(o))
				}
			}
			out = append(out, ft)
		}
		return out, nil
	}
	for _, t := range order {
		ft := fetchedTopic{Topic: t}
		for _, p := range topics[t] {
			if o, ok := byTP[t][p]; ok {
				ft.Partitions = append(ft.Partitions, found(o))
			} else {
				ft.Partitions = append(ft.Partitions, fetchedPartition{Partition: p, Offset: -1, LeaderEpoch: -1})
			}
		}
		out = append(out, ft)
	}
	return out, nil
}

func (s *Server) handleOffsetFetch(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if r.Version >= 8 {
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			var topics map[string][]int32
			var order []string
			if g.Topics != nil {
				topics = map[string][]int32{}
				for _, t := range g.Topics {
					if _, ok := topics[t.Topic]; !ok {
						order = append(order, t.Topic)
					}
					topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
				}
			}
			var fts []fetchedTopic
			err := error(nil)
			if r.Version >= 9 && s.allowed(r, opDescribe, resGroup, g.Group) {
				err = s.deps.Groups.ValidateOffsetFetch(g.Group, optString(g.MemberID), g.MemberEpoch)
			}
			if err == nil {
				fts, err = s.fetchGroupOffsets(ctx, r, g.Group, topics, order, req.RequireStable)
			}
			rg.ErrorCode = errorCode(err)
			for _, ft := range fts {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic = ft.Topic
				for _, fp := range ft.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					md := fp.Metadata
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = fp.Partition, fp.Offset, fp.LeaderEpoch, &md, fp.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		return Result{Resp: resp}
	}
	var topics map[string][]int32
	var order []string
	// v0 and v1 always name their topics; from v2 null means every committed offset.
	if req.Topics != nil || r.Version < 2 {
		topics = map[string][]int32{}
		for _, t := range req.Topics {
			if _, ok := topics[t.Topic]; !ok {
				order = append(order, t.Topic)
			}
			topics[t.Topic] = append(topics[t.Topic], t.Partitions...)
		}
	}
	fts, err := s.fetchGroupOffsets(ctx, r, req.Group, topics, order, r.Version >= 7 && req.RequireStable)
	if err != nil {
		return Result{Resp: offsetFetchError(req, errorCode(err))}
	}
	for _, ft := range fts {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = ft.Topic
		for _, fp := range ft.Partitions {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			md := fp.Metadata
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = fp.Partition, fp.Offset, fp.LeaderEpoch, &md, fp.ErrorCode
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return Result{Resp: resp}
}

// offsetFetchError is Kafka's OffsetFetch error response: v0-v1 carry the error on every
// requested partition, v2-v7 at the top level, v8+ on every group.
func offsetFetchError(req *kmsg.OffsetFetchRequest, code int16) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	switch {
	case req.Version >= 8:
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, code
			resp.Groups = append(resp.Groups, rg)
		}
	case req.Version >= 2:
		resp.ErrorCode = code
	default:
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				empty := ""
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p, -1, -1, &empty, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp
}

// offsetFetchAPI: from v1 (v0 read ZooKeeper's offsets); v8 is the batched form, v9
// KIP-848's (a consumer group member's fetch carries its member epoch); capped below
// topic ids (v10).
var offsetFetchAPI = api{key: kmsg.OffsetFetch, min: 1, max: 9, handle: (*Server).handleOffsetFetch, needs: needGroups, errors: errorsOf(offsetFetchError)}
