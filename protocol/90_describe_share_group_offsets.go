package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// handleDescribeShareGroupOffsets reports each share partition's start offset: DESCRIBE
// on the group, and on each topic (a denied topic is left out when the request asks for
// every topic, as Kafka does). Lag (v1) is known only for partitions this broker leads,
// -1 elsewhere. Each partition also carries its record counts in ShareCountsTag.
func (s *Server) handleDescribeShareGroupOffsets(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.DescribeShareGroupOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	im := s.image()
	for _, g := range req.Groups {
		rg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
		rg.GroupID = g.GroupID
		if !s.allowed(r, opDescribe, resGroup, g.GroupID) {
			rg.ErrorCode = errGroupDenied.Code
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		var want map[string][]int32
		if g.Topics != nil {
			want = map[string][]int32{}
			for _, t := range g.Topics {
				want[t.Topic] = append(want[t.Topic], t.Partitions...)
			}
		}
		states, err := s.deps.ShareGroups.GroupOffsets(ctx, g.GroupID, want)
		if err != nil {
			rg.ErrorCode, rg.ErrorMessage = errorCode(err), errorMessage(err)
			resp.Groups = append(resp.Groups, rg)
			continue
		}
		topics := g.Topics
		if topics == nil {
			for _, st := range states {
				if n := len(topics); n == 0 || topics[n-1].Topic != st.Topic {
					topics = append(topics, kmsg.DescribeShareGroupOffsetsRequestGroupTopic{Topic: st.Topic})
				}
				topics[len(topics)-1].Partitions = append(topics[len(topics)-1].Partitions, st.Partition)
			}
		}
		for _, t := range topics {
			allowed := s.allowed(r, opDescribe, resTopic, t.Topic)
			if !allowed && g.Topics == nil {
				continue
			}
			rt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
			rt.Topic = t.Topic
			it := im.Topic(t.Topic)
			if it != nil && allowed {
				rt.TopicID = it.ID
			}
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
				rp.Partition, rp.StartOffset, rp.LeaderEpoch, rp.Lag = p, -1, -1, -1
				switch {
				case !allowed:
					rp.ErrorCode = errTopicDenied.Code
				case it == nil || p < 0 || int(p) >= len(it.Partitions):
					rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				default:
					i := slices.IndexFunc(states, func(st sharegroup.PartitionState) bool { return st.Topic == t.Topic && st.Partition == p })
					if i >= 0 {
						st := states[i]
						rp.StartOffset, rp.LeaderEpoch = st.StartOffset, st.LeaderEpoch
						rp.Lag = s.shareLag(st)
						rp.UnknownTags.Set(sharegroup.CountsTag, sharegroup.AppendCounts(nil, st))
					}
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rg.Topics = append(rg.Topics, rt)
		}
		resp.Groups = append(resp.Groups, rg)
	}
	return Result{Resp: resp}
}

// shareLag is how many records of the partition the group has yet to complete: those
// from the start offset to the high watermark, less those already acknowledged or
// archived; -1 unless this broker leads the partition (it alone knows the high watermark).
func (s *Server) shareLag(st sharegroup.PartitionState) int64 {
	if st.StartOffset < 0 {
		return -1
	}
	hw, ok := s.deps.Replicas.LeaderHighWatermark(st.Topic, st.Partition)
	if !ok {
		return -1
	}
	return max(0, hw-st.StartOffset-st.Acknowledged-st.Archived)
}

// describeShareGroupOffsetsAPI: every version kmsg knows.
var describeShareGroupOffsetsAPI = api{key: kmsg.DescribeShareGroupOffsets, min: 0, max: 1, handle: (*Server).handleDescribeShareGroupOffsets, needs: needGroups}
