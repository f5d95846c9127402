package controller

import (
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func TestParseVoters(t *testing.T) {
	v, err := ParseVoters(" 3@c:9093, 1@a:9093,2@[::1]:9093 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Voter{{1, "a:9093"}, {2, "[::1]:9093"}, {3, "c:9093"}}
	if !slices.Equal(v, want) {
		t.Fatalf("%v", v)
	}
	if FormatVoters(v) != "1@a:9093,2@[::1]:9093,3@c:9093" {
		t.Fatal(FormatVoters(v))
	}
	for _, bad := range []string{"", "1", "x@a:1", "-1@a:1", "1@a", "1@a:0", "1@a:99999", "1@:9093", "1@a:1,1@b:1", "1@a:1,2@a:1"} {
		if _, err := ParseVoters(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestConfigDefaultsAndValidation(t *testing.T) {
	voters := []Voter{{1, "127.0.0.1:1"}}
	c, err := (&Config{NodeID: 1, Voters: voters, DataDir: t.TempDir()}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.SessionTimeout != 9*time.Second || c.DefaultPartitions != 1 || c.DefaultReplicationFactor != 1 || c.UncleanLeaderElection {
		t.Fatalf("defaults %+v", c)
	}
	for _, bad := range []Config{
		{NodeID: 2, Voters: voters, DataDir: "x"}, // joining, with no address to be reached at
		{NodeID: 1, DataDir: "x"},
		{NodeID: 1, Voters: voters},
		{NodeID: 1, Voters: voters, DataDir: "x", DefaultPartitions: -1},
		{NodeID: 1, Voters: append(voters, Voter{1, "127.0.0.1:2"}), DataDir: "x"},
	} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("accepted %+v", bad)
		}
	}
}

func TestDataDirBelongsToOneNode(t *testing.T) {
	dir := t.TempDir()
	if err := checkNodeID(dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := checkNodeID(dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := checkNodeID(dir, 2); err == nil {
		t.Fatal("another node id accepted the data directory")
	}
}

func TestApplyConfigOps(t *testing.T) {
	cur := map[string]string{"retention.ms": "1000", "segment.bytes": "2048"}
	got, err := metadata.ApplyConfigOps(cur, []metadata.ConfigOp{
		{Name: "retention.ms", Op: metadata.ConfigDelete},
		{Name: "max.message.bytes", Value: strp("10"), Op: metadata.ConfigSet},
		{Name: "cleanup.policy", Value: strp("compact"), Op: metadata.ConfigAppend},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["segment.bytes"] != "2048" || got["max.message.bytes"] != "10" || got["cleanup.policy"] != "delete,compact" {
		t.Fatalf("%v", got)
	}
	if cur["retention.ms"] != "1000" {
		t.Fatal("current configs modified")
	}
	got, _ = metadata.ApplyConfigOps(got, []metadata.ConfigOp{{Name: "cleanup.policy", Value: strp("delete"), Op: metadata.ConfigSubtract}}, true)
	if got["cleanup.policy"] != "compact" {
		t.Fatalf("subtract: %v", got)
	}
	got, _ = metadata.ApplyConfigOps(cur, []metadata.ConfigOp{{Name: "flush.ms", Value: strp("5")}}, false)
	if len(got) != 1 || got["flush.ms"] != "5" {
		t.Fatalf("whole set: %v", got)
	}
	for _, c := range []struct {
		ops  []metadata.ConfigOp
		inc  bool
		want *kerr.Error
	}{
		{[]metadata.ConfigOp{{Name: "a", Value: strp("1")}, {Name: "a", Value: strp("2")}}, true, kerr.InvalidRequest},
		{[]metadata.ConfigOp{{Name: "retention.ms"}}, true, kerr.InvalidRequest},
		{[]metadata.ConfigOp{{Name: "retention.ms"}}, false, kerr.InvalidRequest},
		{[]metadata.ConfigOp{{Name: "retention.ms", Value: strp("1"), Op: metadata.ConfigAppend}}, true, kerr.InvalidConfig},
		{[]metadata.ConfigOp{{Name: "nope", Value: strp("1"), Op: metadata.ConfigAppend}}, true, kerr.InvalidConfig},
		{[]metadata.ConfigOp{{Name: "retention.ms", Value: strp("1"), Op: 9}}, true, kerr.InvalidRequest},
	} {
		if _, err := metadata.ApplyConfigOps(cur, c.ops, c.inc); !errors.Is(err, c.want) {
			t.Errorf("%+v: got %v, want %s", c.ops, err, c.want.Message)
		}
	}
}

func TestDeltaLogSince(t *testing.T) {
	l := newDeltaLog(3, 0)
	for off := uint64(2); off <= 20; off += 2 {
		l.append(&pb.MetadataDelta{Offset: off, PrevOffset: off - 2})
	}
	// Capacity 3, trimmed at 2*3: the oldest kept deltas follow l.base.
	ds, ok := l.since(20, 20)
	if !ok || len(ds) != 0 {
		t.Fatal("up to date")
	}
	ds, ok = l.since(16, 20)
	if !ok || len(ds) != 2 || ds[0].Offset != 18 {
		t.Fatalf("since 16: %v %v", ds, ok)
	}
	if _, ok := l.since(0, 20); ok {
		t.Fatal("trimmed history served")
	}
	if _, ok := l.since(17, 20); ok {
		t.Fatal("an offset that is no state served")
	}
	if _, ok := l.since(22, 20); ok {
		t.Fatal("a future offset served")
	}
	ds, ok = l.since(l.base, 20)
	if !ok || ds[0].PrevOffset != l.base {
		t.Fatal("from base")
	}
	ch := l.changed
	l.reset(30)
	select {
	case <-ch:
	default:
		t.Fatal("reset did not wake watchers")
	}
	if _, ok := l.since(20, 30); ok {
		t.Fatal("history before a restore served")
	}
}

func TestApplyDeltaRejectsMisfits(t *testing.T) {
	im := emptyImage()
	id := make([]byte, 16)
	id[0] = 1
	for _, d := range []*pb.MetadataDelta{
		{Offset: 1, PrevOffset: 5},
		{Offset: 0, PrevOffset: 0},
		{Offset: 1, DeletedTopics: []string{"x"}},
		{Offset: 1, Topics: []*pb.TopicDelta{{Name: "x", Id: id}}},
		{Offset: 1, Topics: []*pb.TopicDelta{{Name: "x", Id: []byte{1}, Created: true}}},
		{Offset: 1, Topics: []*pb.TopicDelta{{Name: "x", Id: id, Created: true, Partitions: []*pb.PartitionState{{Index: 1}}}}},
	} {
		if _, err := applyDelta(im, d); err == nil {
			t.Errorf("applied %v", d)
		}
	}
}

func TestImageChunksRoundTrip(t *testing.T) {
	h := buildBusyFSM(t)
	im := h.f.img
	chunks := imageChunks(im, h.f.sortedBrokersLocked(), 4)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	var a imageAssembler
	var got *metadata.Image
	for i, c := range chunks {
		out, err := a.add(c)
		if err != nil {
			t.Fatal(err)
		}
		if (out != nil) != (i == len(chunks)-1) {
			t.Fatalf("image completed at chunk %d of %d", i, len(chunks))
		}
		got = out
	}
	if got.Offset != im.Offset || len(got.Topics) != len(im.Topics) || len(got.Brokers) != len(im.Brokers) {
		t.Fatal("reassembled image differs")
	}
	if _, err := a.add(chunks[1]); err == nil {
		t.Fatal("a chunk without its first accepted")
	}
}

// TestMuxRoutesByFirstByte puts a Raft-tagged connection and another connection on one
// port and checks each lands on its side, first bytes intact.
func TestMuxRoutesByFirstByte(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := newConnMux(ln, staticAddr(ln.Addr().String()), testLogger(t))
	m.start()
	defer m.close()
	stream := raftStreamLayer{m.raft}

	rc, err := stream.Dial("127.0.0.1:0", time.Second)
	if err == nil {
		rc.Close()
		t.Fatal("dialled port 0")
	}
	rc, err = stream.Dial(raft.ServerAddress(ln.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rc.Write([]byte("raft"))
	gc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	gc.Write([]byte("PRI *"))

	read := func(l net.Listener, n int) string {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		buf := make([]byte, n)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		return string(buf)
	}
	if got := read(m.raft, 4); got != "raft" {
		t.Fatalf("raft side read %q", got)
	}
	if got := read(m.grpc, 5); got != "PRI *" {
		t.Fatalf("gRPC side read %q", got)
	}
	if m.raft.Addr().String() != ln.Addr().String() {
		t.Fatal("advertised address")
	}
}
