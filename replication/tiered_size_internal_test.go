package replication

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/tiered/objstore"
)

// noRemoteLogs refuses every change: a Driven manager's uploader never runs.
type noRemoteLogs struct{ metadata.RemoteLogStore }

// remoteSizeSeries gathers reg's shale_remote_log_size_bytes and shale_remote_log_segments
// series by partition label.
func remoteSizeSeries(t *testing.T, reg *prometheus.Registry) (bytes, segs map[string]float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	bytes, segs = map[string]float64{}, map[string]float64{}
	for _, mf := range mfs {
		var into map[string]float64
		switch mf.GetName() {
		case "shale_remote_log_size_bytes":
			into = bytes
		case "shale_remote_log_segments":
			into = segs
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for _, l := range m.GetLabel() {
				key += l.GetName() + "=" + l.GetValue() + " "
			}
			into[key] = m.GetGauge().GetValue()
		}
	}
	return bytes, segs
}

// TestRemoteLogSizeMetrics: the remote log size gauges come from each tiered partition's
// leader only (a follower reports nothing, nor does a leader of an untiered topic), count
// only the committed segments still in the log, follow leadership when it moves, and go
// with the topic.
func TestRemoteLogSizeMetrics(t *testing.T) {
	tid := [16]byte{9}
	tiered := map[string]string{"remote.storage.enable": "true"}
	part := func(i, leader int32, epoch int32) metadata.Partition {
		return metadata.Partition{Topic: "t", Index: i, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: leader, LeaderEpoch: epoch, PartitionEpoch: epoch}
	}
	seg := func(id string, base, end, size int64, st metadata.RemoteSegmentState) metadata.RemoteSegment {
		return metadata.RemoteSegment{TopicID: tid, UploadID: id, BaseOffset: base, EndOffset: end, SizeBytes: size, State: st}
	}
	logs := metadata.RemoteLogs{
		// Partition 0: one segment being deleted, one wholly below the log start, two live.
		{Topic: "t", Partition: 0}: metadata.NewRemoteLog("t", tid, 0, 25, []metadata.RemoteSegment{
			seg("a", 0, 9, 1, metadata.RemoteSegmentDeleteStarted), seg("b", 10, 19, 10, metadata.RemoteSegmentCommitted),
			seg("c", 20, 39, 100, metadata.RemoteSegmentCommitted), seg("d", 40, 49, 1000, metadata.RemoteSegmentCommitted)}),
		{Topic: "t", Partition: 1}: metadata.NewRemoteLog("t", tid, 1, 0, []metadata.RemoteSegment{
			seg("e", 0, 9, 7, metadata.RemoteSegmentCommitted)}),
	}
	image := func(offset uint64, p0, p1 metadata.Partition, withTopic bool) *metadata.Image {
		im := &metadata.Image{Offset: offset, ControllerID: 1, Brokers: map[int32]metadata.Broker{
			1: {ID: 1, Host: "127.0.0.1", Port: 1, Epoch: 3}, 2: {ID: 2, Host: "127.0.0.1", Port: 2, Epoch: 3},
		}, Topics: map[string]*metadata.Topic{
			// Led here, not tiered: no series.
			"plain": {Name: "plain", ID: [16]byte{8}, Configs: map[string]string{}, Partitions: []metadata.Partition{
				{Topic: "plain", Index: 0, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1}}},
		}}
		if withTopic {
			im.Topics["t"] = &metadata.Topic{Name: "t", ID: tid, Configs: tiered, Partitions: []metadata.Partition{p0, p1}}
			im.RemoteLogs = logs
		}
		return im
	}
	im := image(5, part(0, 1, 1), part(1, 2, 1), true)
	store := &handStore{im: im, lease: true, epoch: 3}
	reg := prometheus.NewRegistry()
	m, err := NewManager(Config{NodeID: 1, LogDir: t.TempDir(), Driven: true, Registry: reg,
		RemoteStore: objstore.NewMemory(), RemoteLogs: noRemoteLogs{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	check := func(what string, wantBytes, wantSegs map[string]float64) {
		t.Helper()
		b, s := remoteSizeSeries(t, reg)
		if len(b) != len(wantBytes) || len(s) != len(wantSegs) {
			t.Fatalf("%s: size %v, segments %v; want %v and %v", what, b, s, wantBytes, wantSegs)
		}
		for k, v := range wantBytes {
			if b[k] != v || s[k] != wantSegs[k] {
				t.Fatalf("%s: size %v, segments %v; want %v and %v", what, b, s, wantBytes, wantSegs)
			}
		}
	}
	const p0, p1 = "partition=0 topic=t ", "partition=1 topic=t "
	check("leading partition 0", map[string]float64{p0: 1100}, map[string]float64{p0: 2})

	// Leadership of both partitions moves: partition 0 to broker 2, partition 1 here.
	m.ApplyImage(image(6, part(0, 2, 2), part(1, 1, 2), true))
	check("leading partition 1", map[string]float64{p1: 7}, map[string]float64{p1: 1})

	// The topic is deleted.
	m.ApplyImage(image(7, metadata.Partition{}, metadata.Partition{}, false))
	check("topic deleted", nil, nil)
}
