package protocol

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/metadata"
	"github.com/shalelog/shale/replication"
)

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
	who := fetchReader(req, version)
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
		name := t.Topic
		unknownID := false
		if version >= 13 {
			// Fetch v13+ names topics by id only.
			name, unknownID = topicNameByID(im, t.TopicID)
		}
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for j, fp := range t.Partitions {
			rp := &rt.Partitions[j]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = fp.Partition
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
			if unknownID {
				rp.ErrorCode = kerr.UnknownTopicID.Code
				stop = true
				continue
			}
			if who.IsFollower() && version < 15 {
				// Only Fetch v15+ carries the broker epoch that proves a replica is current.
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				stop = true
				continue
			}
			maxBytes := min(int(fp.PartitionMaxBytes), remaining)
			if maxBytes <= 0 && total > 0 {
				maxBytes = 0
			}
			if name == metadata.OffsetsTopic { // consumer_offsets.go
				n, waiter, err := s.fetchOffsetsTopic(im, fp, max(maxBytes, 0), rp)
				if err != nil {
					rp.ErrorCode, stop = errorCode(err), true
				} else if n > 0 {
					total, remaining = total+n, remaining-n
				} else {
					waiters = append(waiters, waiter)
				}
				continue
			}
			res := s.deps.Replicas.Fetch(who, replication.FetchPartition{
				Topic: name, Index: fp.Partition, CurrentLeaderEpoch: fp.CurrentLeaderEpoch, FetchOffset: fp.FetchOffset,
				LastFetchedEpoch: fp.LastFetchedEpoch, MaxBytes: max(maxBytes, 0), MinOne: total == 0,
			})
			rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
			if res.Err != nil {
				rp.ErrorCode = errorCode(res.Err)
				stop = true
				continue
			}
			if res.DivergingEpoch >= 0 || res.DivergingEndOffset >= 0 {
				// The fetcher's log diverged from ours: tell it where to truncate.
				rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset = res.DivergingEpoch, res.DivergingEndOffset
				stop = true
				continue
			}
			waiters = append(waiters, res.Waiter)
			if res.View == nil {
				continue
			}
			total += res.View.Size
			remaining -= res.View.Size
			parts = append(parts, fetchPart{rp: rp, view: res.View})
		}
	}
	s.cfg.Metrics.BytesFetched.Add(float64(total))
	return resp, parts, total, stop, waiters
}

// fetchReader says who sends a fetch: a follower names itself in ReplicaState (v15+) or
// ReplicaID (earlier versions, which cannot prove their broker epoch).
func fetchReader(req *kmsg.FetchRequest, version int16) replication.Reader {
	if version >= 15 {
		return replication.Reader{ReplicaID: req.ReplicaState.ID, BrokerEpoch: req.ReplicaState.Epoch}
	}
	return replication.Reader{ReplicaID: req.ReplicaID, BrokerEpoch: -1}
}

// topicNameByID resolves a topic id; unknown is true when no topic has it.
func topicNameByID(im *metadata.Image, id [16]byte) (name string, unknown bool) {
	if offsetsTopicByID(im, id) {
		return metadata.OffsetsTopic, false
	}
	for _, t := range im.Topics {
		if t.ID == id {
			return t.Name, false
		}
	}
	return "", true
}
