package protocol

import (
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/controller/controllertest"
	"github.com/shalelog/shale/coordinator/group"
	sharegroup "github.com/shalelog/shale/coordinator/share"
	"github.com/shalelog/shale/coordinator/txn/producerid"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/replication"
)

// fuzzServer is a server with one topic whose replica leads, for driving decode and
// dispatch directly.
func fuzzServer(f *testing.F) *Server {
	dir := f.TempDir()
	store := controllertest.Start(f).Store()
	lg := slog.New(slog.NewTextHandler(io.Discard, nil))
	res := store.CreateTopics(context.Background(), []metadata.TopicSpec{{Name: "t", NumPartitions: 2, ReplicationFactor: 1,
		Configs: map[string]string{"segment.bytes": "1048576"}}}, false)
	if res[0].Err != nil {
		f.Fatal(res[0].Err)
	}
	controllertest.WaitFor(f, store, "topic t", func(im *metadata.Image) bool { return im.Topic("t") != nil })
	replicas, err := replication.NewManager(replication.Config{NodeID: 1, LogDir: dir, Logger: lg}, store)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { replicas.Close() })
	groups := group.New(group.Config{NodeID: 1, Logger: lg}, store)
	f.Cleanup(func() { groups.Close() })
	shareGroups := sharegroup.New(sharegroup.Config{NodeID: 1, Logger: lg, Classic: groups}, store)
	groups.SetShareGroups(shareGroups)
	f.Cleanup(func() { shareGroups.Close() })
	return NewServer(Config{NodeID: 1, AutoCreateTopics: false, DeleteTopicEnable: true, Logger: lg, MaxRequestBytes: 1 << 20},
		Deps{Meta: store, Replicas: replicas, ProducerIDs: producerid.New(store), Groups: groups, ShareGroups: shareGroups})
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
		c := &conn{s: s, nc: fakeConn{}, lg: s.lg, stopRead: make(chan struct{})}
		req, err := c.decode(body)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		res := c.dispatch(ctx, req)
		for res.Wait != nil {
			res = res.Wait(ctx)
		}
		if res.Resp != nil {
			res.Resp.AppendTo(nil)
		}
		if res.Release != nil {
			res.Release()
		}
	})
}

// fakeConn is only asked for its address.
type fakeConn struct{ net.Conn }

func (fakeConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
