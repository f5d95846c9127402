package protocol

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// handleAlterPartitionReassignments is Kafka's AlterPartitionReassignments (KIP-455,
// kafka-reassign-partitions.sh, kadm's AlterPartitionAssignments): each partition gets a
// new target replica set, or with null replicas its reassignment is cancelled. The
// controller moves the data; ListPartitionReassignments shows the progress. v1 adds
// AllowReplicationFactorChange (KIP-860).
func (s *Server) handleAlterPartitionReassignments(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	ctx, cancel := requestContext(ctx, req.TimeoutMillis)
	defer cancel()

	var ras []metadata.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ras = append(ras, metadata.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas,
				RefuseReplicationFactorChange: req.Version >= 1 && !req.AllowReplicationFactorChange})
		}
	}
	// answer gives each partition its outcome, in request order.
	answer := func(errs []error) Result {
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
				rp.Partition = p.Partition
				if err := errs[i]; err != nil {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return Result{Resp: resp}
	}
	all := func(err error) Result {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		errs := make([]error, len(ras))
		for i := range errs {
			errs[i] = err
		}
		return answer(errs)
	}

	if !s.allowedCluster(r, opAlter) {
		return all(errClusterDenied)
	}
	if len(ras) == 0 {
		return answer(nil)
	}
	errs, err := s.deps.Meta.AlterPartitionReassignments(ctx, ras)
	if err != nil {
		return all(err)
	}
	// Answer once this broker's image shows every accepted change, so that a
	// ListPartitionReassignments or Metadata sent here next sees it.
	s.awaitVisible(ctx, func(im *metadata.Image) bool {
		for i, ra := range ras {
			if errs[i] != nil {
				continue
			}
			p := im.Partition(ra.Topic, ra.Partition)
			if p == nil {
				continue // deleted since
			}
			if ra.Replicas == nil {
				if p.Reassigning() {
					return false
				}
			} else if len(p.Replicas) < len(ra.Replicas) || !slices.Equal(p.Replicas[:len(ra.Replicas)], ra.Replicas) {
				return false
			}
		}
		return true
	})
	return answer(errs)
}

// alterPartitionReassignmentsAPI: every version kmsg knows.
var alterPartitionReassignmentsAPI = api{key: kmsg.AlterPartitionAssignments, min: 0, max: 1, handle: (*Server).handleAlterPartitionReassignments, errors: errorsOf(alterPartitionReassignmentsError)}

func alterPartitionReassignmentsError(req *kmsg.AlterPartitionAssignmentsRequest, code int16) *kmsg.AlterPartitionAssignmentsResponse {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.ErrorCode = code
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
