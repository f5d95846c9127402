package protocol

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// markerTimeout bounds the wait for a marker's replication, as Kafka bounds it with
// request.timeout.ms (30 s by default); the coordinator retries what timed out.
const markerTimeout = 30 * time.Second

// handleWriteTxnMarkers appends the transaction coordinator's commit or abort markers to
// the partitions this broker leads and answers once the ISR has them. It is a
// broker-to-broker request: CLUSTER_ACTION on the cluster.
func (s *Server) handleWriteTxnMarkers(_ context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	denied := s.authorizing() && !s.allowedCluster(r, opClusterAction)

	// Each partition's outcome goes back to its place in the response.
	type at struct {
		mp      *replication.MarkerPartition
		m, t, p int
	}
	var markers []*replication.TxnMarker
	var places []at
	for mi, m := range req.Markers {
		rm := kmsg.NewWriteTxnMarkersResponseMarker()
		rm.ProducerID = m.ProducerID
		mk := &replication.TxnMarker{ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Committed, CoordinatorEpoch: m.CoordinatorEpoch}
		for ti, t := range m.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for pi, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				switch {
				case denied:
					rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				case t.Topic == metadata.OffsetsTopic:
					// Shale's consumer offsets live in the controller quorum, where the
					// coordinator completes a transaction's offsets itself: there is no
					// log to mark.
				default:
					mp := &replication.MarkerPartition{Topic: t.Topic, Index: p}
					mk.Partitions = append(mk.Partitions, mp)
					places = append(places, at{mp: mp, m: mi, t: ti, p: pi})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			rm.Topics = append(rm.Topics, rt)
		}
		resp.Markers = append(resp.Markers, rm)
		markers = append(markers, mk)
	}
	if len(places) == 0 {
		return Result{Resp: resp}
	}
	return Result{Wait: func(ctx context.Context) Result {
		s.deps.Replicas.WriteTxnMarkers(ctx, markers, markerTimeout)
		for _, p := range places {
			if p.mp.Err != nil {
				resp.Markers[p.m].Topics[p.t].Partitions[p.p].ErrorCode = errorCode(p.mp.Err)
			}
		}
		return Result{Resp: resp}
	}}
}

// writeTxnMarkersAPI: v0-v1, what Shale's transaction coordinators send; v2 is not
// served.
var writeTxnMarkersAPI = api{key: kmsg.WriteTxnMarkers, min: 0, max: 1, handle: (*Server).handleWriteTxnMarkers}
