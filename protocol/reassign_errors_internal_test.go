package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// A failed AlterPartitionReassignments or ListPartitionReassignments is answered, not a
// closed connection.
func TestReassignmentErrorResponses(t *testing.T) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = "t"
	for _, p := range []int32{0, 3} {
		rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		rp.Partition, rp.Replicas = p, []int32{1}
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, ok := errorResponse(req, codeUnknownServerError).(*kmsg.AlterPartitionAssignmentsResponse)
	if !ok || resp.ErrorCode != codeUnknownServerError || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("error response %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != codeUnknownServerError {
			t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
		}
	}
	list, ok := errorResponse(kmsg.NewPtrListPartitionReassignmentsRequest(), codeUnknownServerError).(*kmsg.ListPartitionReassignmentsResponse)
	if !ok || list.ErrorCode != codeUnknownServerError {
		t.Fatalf("list error response %+v", list)
	}
}
