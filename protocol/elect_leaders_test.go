package protocol_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestElectLeadersVersions checks the request and response shapes of every version
// against a one-broker cluster, where the one broker already leads every partition.
func TestElectLeadersVersions(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("el", 2, nil)
	rc := dialRaw(t, tb.addr)
	for v := int16(0); v <= 2; v++ {
		for _, typ := range []int8{0, 1} {
			if v == 0 && typ == 1 {
				continue
			}
			req := kmsg.NewPtrElectLeadersRequest()
			req.Version, req.ElectionType, req.TimeoutMillis = v, typ, 5000
			for _, tp := range []struct {
				topic string
				parts []int32
			}{{"el", []int32{1, 0}}, {"missing", []int32{0}}} {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic, rt.Partitions = tp.topic, tp.parts
				req.Topics = append(req.Topics, rt)
			}
			resp := rc.roundTrip(req).(*kmsg.ElectLeadersResponse)
			if resp.ErrorCode != 0 || len(resp.Topics) != 2 {
				t.Fatalf("v%d type %d: %+v", v, typ, resp)
			}
			el, missing := resp.Topics[0], resp.Topics[1]
			if el.Topic != "el" || len(el.Partitions) != 2 || el.Partitions[0].Partition != 0 || el.Partitions[1].Partition != 1 {
				t.Fatalf("v%d type %d: %+v", v, typ, el)
			}
			for _, p := range el.Partitions {
				if p.ErrorCode != kerr.ElectionNotNeeded.Code {
					t.Errorf("v%d type %d el-%d: code %d", v, typ, p.Partition, p.ErrorCode)
				}
			}
			if missing.Topic != "missing" || len(missing.Partitions) != 1 || missing.Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				t.Errorf("v%d type %d: %+v", v, typ, missing)
			}

			// Null topics: every partition; none needs an election, so none is listed.
			req.Topics = nil
			if resp := rc.roundTrip(req).(*kmsg.ElectLeadersResponse); resp.ErrorCode != 0 || len(resp.Topics) != 0 {
				t.Errorf("v%d type %d all partitions: %+v", v, typ, resp)
			}
		}
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version, req.ElectionType = 2, 7
	if resp := rc.roundTrip(req).(*kmsg.ElectLeadersResponse); resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("unknown election type: %+v", resp)
	}
}
