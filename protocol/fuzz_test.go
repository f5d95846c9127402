package protocol_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/server/broker"
	"github.com/shalelog/shale/server/broker/brokertest"
)

// fuzzServer is a broker's protocol server, built as the node builds it (with a group
// coordinator), with one topic whose replicas lead, for driving decode and dispatch
// directly.
func fuzzServer(f *testing.F) *protocol.Server {
	b := brokertest.Start(f, brokertest.WithOptions(func(o *broker.Options) {
		o.Protocol = protocol.Config{AutoCreateTopics: false, DeleteTopicEnable: true, MaxRequestBytes: 1 << 20}
		o.Groups = &group.Config{}
	}))
	res := b.Store.CreateTopics(context.Background(), []metadata.TopicSpec{{Name: "t", NumPartitions: 2, ReplicationFactor: 1,
		Configs: map[string]string{"segment.bytes": "1048576"}}}, false)
	if res[0].Err != nil {
		f.Fatal(res[0].Err)
	}
	b.WaitApplied("topic t", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	return b.Protocol()
}

// seedRequest frames a request body (header + payload) the way a client sends it.
func seedRequest(req kmsg.Request) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, 7)
	b = kbin.AppendNullableString(b, nil)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

// FuzzRequest feeds arbitrary request bodies through header decoding, kmsg decoding,
// dispatch to every handler, and response encoding: nothing may panic or hang.
func FuzzRequest(f *testing.F) {
	s := fuzzServer(f)
	for key := int16(0); key <= 92; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		for _, v := range []int16{req.MaxVersion(), 0} {
			req.SetVersion(v)
			f.Add(seedRequest(req))
		}
	}
	produce := kmsg.NewPtrProduceRequest()
	produce.Version = 9
	produce.Acks = 1
	produce.Topics = []kmsg.ProduceRequestTopic{{Topic: "t", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: make([]byte, 70)}}}}
	f.Add(seedRequest(produce))
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.ReplicaID = -1
	fetch.SessionEpoch = -1
	fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "t", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20}}}}
	f.Add(seedRequest(fetch))

	f.Fuzz(func(t *testing.T, body []byte) {
		protocol.DispatchRaw(s, body)
	})
}
