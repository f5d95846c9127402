package protocol

import (
	"context"
	"errors"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/partition"
)

// FollowerTracker is told of every follower fetch, so the leader side of replication can
// track follower positions and advance the high watermark. Nil on a broker without it.
type FollowerTracker interface {
	FollowerFetched(p *partition.Partition, replicaID int32, fetchOffset int64)
}

// defaultFetchMaxBytes is fetch.max.bytes' default, for Fetch v0-v2 that carry no limit.
const defaultFetchMaxBytes = 50 << 20

func (s *Server) handleFetch(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.FetchRequest)

	// Shale keeps no fetch sessions (KIP-227): a request to create one is answered with
	// session id 0, which tells the client to send full fetches; an incremental fetch on
	// a session id is refused.
	if req.SessionID != 0 || req.SessionEpoch > 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
		if req.SessionID == 0 {
			resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		}
		return Result{Resp: resp}
	}

	build := func() (*kmsg.FetchResponse, []fetchPart, int, bool, []<-chan struct{}) {
		return s.buildFetch(req, r.Version)
	}
	resp, parts, n, stop, waiters := build()
	maxWait := time.Duration(req.MaxWaitMillis) * time.Millisecond
	if stop || n >= int(req.MinBytes) || maxWait <= 0 || len(waiters) == 0 {
		return s.fetchResult(resp, parts)
	}
	releaseViews(parts)
	deadline := r.Received.Add(maxWait)
	return Result{Wait: func(ctx context.Context) Result {
		for {
			timer := time.NewTimer(time.Until(deadline))
			woke := waitAny(ctx, waiters, timer.C)
			timer.Stop()
			resp, parts, n, stop, waiters = build()
			if !woke || stop || n >= int(req.MinBytes) || len(waiters) == 0 || !time.Now().Before(deadline) {
				return s.fetchResult(resp, parts)
			}
			releaseViews(parts)
		}
	}}
}

func (s *Server) fetchResult(resp *kmsg.FetchResponse, parts []fetchPart) Result {
	bufs := encodeFetch(resp, parts, s.sentinel)
	return Result{Encoded: bufs, Flexible: resp.IsFlexible(), Release: func() { releaseViews(parts) }}
}

func releaseViews(parts []fetchPart) {
	for _, fp := range parts {
		if fp.view != nil {
			fp.view.Release()
		}
	}
}

// waitAny blocks until one of chans is closed (true), the timer fires or ctx ends (false).
func waitAny(ctx context.Context, chans []<-chan struct{}, timer <-chan time.Time) bool {
	if len(chans) == 1 {
		select {
		case <-chans[0]:
			return true
		case <-timer:
		case <-ctx.Done():
		}
		return false
	}
	cases := make([]reflect.SelectCase, 0, len(chans)+2)
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	i, _, _ := reflect.Select(cases)
	return i >= 2
}

// buildFetch reads every requested partition once. It returns the response, the views
// to splice in, the bytes gathered, whether to answer at once regardless of MinBytes
// (an error, as Kafka does), and the waiters to park on otherwise.
func (s *Server) buildFetch(req *kmsg.FetchRequest, version int16) (*kmsg.FetchResponse, []fetchPart, int, bool, []<-chan struct{}) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	im := s.image()
	leaseOK := s.deps.Meta.LeaseValid()
	follower := req.ReplicaID >= 0
	remaining := int(req.MaxBytes)
	if version < 3 || remaining <= 0 {
		remaining = defaultFetchMaxBytes
	}
	var (
		parts   []fetchPart
		total   int
		stop    bool
		waiters []<-chan struct{}
	)
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for i, t := range req.Topics {
		rt := &resp.Topics[i]
		*rt = kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for j, fp := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			var p *partition.Partition
			if im.Partition(t.Topic, fp.Partition) == nil {
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			} else if p = s.deps.Partitions.Get(t.Topic, fp.Partition); p == nil || p.Role() != partition.RoleLeader || !leaseOK {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			} else if code := checkLeaderEpoch(fp.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
				rp.ErrorCode = code
			}
			if rp.ErrorCode != 0 {
				stop = true
				continue
			}
			if follower && s.deps.Followers != nil {
				s.deps.Followers.FollowerFetched(p, req.ReplicaID, fp.FetchOffset)
			}
			hw := p.HighWatermark()
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = hw, hw, p.LogStartOffset()
			if fp.LastFetchedEpoch >= 0 {
				epoch, end := p.EndOffsetForEpoch(fp.LastFetchedEpoch)
				if epoch != fp.LastFetchedEpoch || end < fp.FetchOffset {
					// The fetcher's log diverged from ours: tell it where to truncate.
					rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = epoch, end
					stop = true
					continue
				}
			}
			waiters = append(waiters, p.Waiter())
			maxBytes := min(int(fp.PartitionMaxBytes), remaining)
			if maxBytes <= 0 && total > 0 {
				continue
			}
			view, err := p.Read(fp.FetchOffset, max(maxBytes, 0), follower, total == 0)
			if err != nil {
				rp.ErrorCode = errorCode(err)
				if errors.Is(err, shalelog.ErrOffsetOutOfRange) {
					rp.ErrorCode = kerr.OffsetOutOfRange.Code
				}
				stop = true
				continue
			}
			total += view.Size
			remaining -= view.Size
			parts = append(parts, fetchPart{rp: rp, view: view})
		}
	}
	s.cfg.Metrics.BytesFetched.Add(float64(total))
	return resp, parts, total, stop, waiters
}

// checkLeaderEpoch applies KIP-320's fencing: a client that knows a newer epoch than
// this replica talks to a stale leader (UNKNOWN_LEADER_EPOCH, retriable); one with an
// older epoch must refresh its metadata (FENCED_LEADER_EPOCH).
func checkLeaderEpoch(requested, current int32) int16 {
	switch {
	case requested < 0:
		return 0
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	case requested > current:
		return kerr.UnknownLeaderEpoch.Code
	}
	return 0
}
