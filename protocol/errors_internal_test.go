package protocol

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestElectLeadersErrorResponse: a failed ElectLeaders is answered, not a closed
// connection, with the code on every partition named.
func TestElectLeadersErrorResponse(t *testing.T) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	rt := kmsg.NewElectLeadersRequestTopic()
	rt.Topic, rt.Partitions = "t", []int32{0, 3}
	req.Topics = append(req.Topics, rt)
	resp, ok := errorResponse(req, codeUnknownServerError).(*kmsg.ElectLeadersResponse)
	if !ok || resp.ErrorCode != codeUnknownServerError || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("error response %+v", resp)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != codeUnknownServerError {
			t.Fatalf("partition %d: code %d", p.Partition, p.ErrorCode)
		}
	}
}
