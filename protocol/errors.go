package protocol

import (
	"context"
	"errors"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
)

// Kafka error codes used directly.
const (
	codeNone               int16 = 0
	codeUnknownServerError int16 = -1
	codeUnsupportedVersion int16 = 35
)

// errorCode maps an error from any layer to the code Kafka would send. Errors that wrap
// a *kerr.Error carry their own code; storage errors map to KAFKA_STORAGE_ERROR so that
// clients retry elsewhere instead of hanging (a full disk is not BROKER_NOT_AVAILABLE).
func errorCode(err error) int16 {
	if err == nil {
		return codeNone
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	if code, ok := records.ErrorCode(err); ok {
		return code
	}
	switch {
	case errors.Is(err, shalelog.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, shalelog.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, shalelog.ErrClosed):
		// The replica was removed (topic deleted, reassigned) or the broker is stopping:
		// the client should look for the partition elsewhere, not mark a disk failed.
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, context.DeadlineExceeded):
		return kerr.RequestTimedOut.Code
	case errors.Is(err, context.Canceled):
		return kerr.RequestTimedOut.Code
	}
	return codeUnknownServerError
}

// errorMessage is the text sent beside a code where the response has a message field:
// only what is specific to this failure. Clients print the code's own name and
// description beside it (kadm's ErrMessage, Kafka's ApiException), so an error that
// wraps a *kerr.Error (kafkaErrorf in the controller, fmt.Errorf("%w: ...") here) has that
// text cut out, wherever in the chain it sits; nil when nothing else is left.
func errorMessage(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	var ke *kerr.Error
	if errors.As(err, &ke) {
		k := ke.Error()
		s = strings.ReplaceAll(s, k+": ", "")
		s = strings.ReplaceAll(s, ": "+k, "")
		if s == k || s == "" {
			return nil
		}
	}
	return &s
}

// errorResponse builds the response Kafka's getErrorResponse would: every topic and
// partition of the request answered with code. It returns nil for request kinds that
// have no builder, and the connection is then closed.
func errorResponse(kreq kmsg.Request, code int16) kmsg.Response {
	switch req := kreq.(type) {
	case *kmsg.ProduceRequest:
		return produceError(req, code)
	case *kmsg.FetchRequest:
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.ListOffsetsRequest:
		return listOffsetsError(req, code)
	case *kmsg.MetadataRequest:
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.CreateTopicsRequest:
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteTopicsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, name := range deleteTopicNames(req) {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			n := name
			rt.Topic, rt.ErrorCode = &n, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DeleteRecordsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDeleteRecordsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LowWatermark = p.Partition, code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.ElectLeadersRequest:
		// Kafka answers a failed ElectLeaders with the top-level code (v1+) and the code
		// on every partition named.
		resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.AlterPartitionAssignmentsRequest:
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
	case *kmsg.ListPartitionReassignmentsRequest:
		resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.InitProducerIDRequest:
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp
	case *kmsg.OffsetForLeaderEpochRequest:
		resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = p.Partition, code, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DescribeConfigsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.AlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.IncrementalAlterConfigsRequest:
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			resp.Resources = append(resp.Resources, rr)
		}
		return resp
	case *kmsg.CreatePartitionsRequest:
		resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	case *kmsg.DescribeClusterRequest:
		resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.OffsetCommitRequest:
		return offsetCommitError(req, code)
	case *kmsg.OffsetFetchRequest:
		return offsetFetchError(req, code)
	case *kmsg.FindCoordinatorRequest:
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = key, -1, -1, code
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp
	case *kmsg.JoinGroupRequest:
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = code, -1, req.MemberID
		return resp
	case *kmsg.HeartbeatRequest:
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.LeaveGroupRequest:
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.SyncGroupRequest:
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = code, []byte{}
		return resp
	case *kmsg.DescribeGroupsRequest:
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode, rg.State = g, code, "Dead"
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.ListGroupsRequest:
		resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
		resp.ErrorCode = code
		return resp
	case *kmsg.DeleteGroupsRequest:
		resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewDeleteGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp
	case *kmsg.OffsetDeleteRequest:
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = code
		return resp
	}
	return nil
}
