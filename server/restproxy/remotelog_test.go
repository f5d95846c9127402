package restproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/acl"
	"github.com/shalelog/shale/security/httpauth"
)

// newRemoteLogFixture is a proxy over an image whose topic t has three partitions with
// remote logs: partition 0 has a segment being deleted, one wholly below the log start
// and two in the log; partition 1 none; partition 2 one left by a deleted topic of the
// same name (another topic id). The proxy's Kafka client never dials: the resource is
// answered from the image alone.
func newRemoteLogFixture(t *testing.T, authz *acl.Authorizer, acls []acl.Binding) *fixture {
	t.Helper()
	id, other := [16]byte{1}, [16]byte{0xee}
	seg := func(tid [16]byte, upload string, base, end, size int64, st metadata.RemoteSegmentState) metadata.RemoteSegment {
		return metadata.RemoteSegment{TopicID: tid, UploadID: upload, BaseOffset: base, EndOffset: end, SizeBytes: size, State: st}
	}
	im := &metadata.Image{ClusterID: "c1", ControllerID: 1, Topics: map[string]*metadata.Topic{
		"t": {Name: "t", ID: id, Partitions: []metadata.Partition{{Leader: 0, Replicas: []int32{0}}, {Leader: 0, Replicas: []int32{0}}, {Leader: 0, Replicas: []int32{0}}}},
	}, RemoteLogs: metadata.RemoteLogs{
		{Topic: "t", Partition: 0}: metadata.NewRemoteLog("t", id, 0, 25, []metadata.RemoteSegment{
			seg(id, "a", 0, 9, 1, metadata.RemoteSegmentDeleteStarted), seg(id, "b", 10, 19, 10, metadata.RemoteSegmentCommitted),
			seg(id, "c", 20, 39, 100, metadata.RemoteSegmentCommitted), seg(id, "d", 40, 49, 1000, metadata.RemoteSegmentCommitted)}),
		{Topic: "t", Partition: 2}: metadata.NewRemoteLog("t", other, 2, 0, []metadata.RemoteSegment{
			seg(other, "e", 0, 9, 5, metadata.RemoteSegmentCommitted)}),
	}}
	if acls != nil {
		im.ACLs = acl.NewSet(acls)
	}
	srv, err := New(Options{Images: images{im}, Kafka: []kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, Authorizer: authz,
		Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u := r.Header.Get("X-User"); u != "" {
					r = r.WithContext(httpauth.WithPrincipal(r.Context(), "User:"+u))
				}
				h.ServeHTTP(w, r)
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &fixture{url: hs.URL + "/v3/clusters/c1", im: im, hs: hs, srv: srv}
}

// The remote log resource answers each partition's remote log offsets and the size of
// its committed segments still in the log, from the image.
func TestRemoteLogResource(t *testing.T) {
	f := newRemoteLogFixture(t, nil, nil)
	st, body := f.call(t, "GET", "/topics/t/partitions/-/remote-log", "", "")
	if st != 200 || body["kind"] != "ShaleRemoteLogList" || body["metadata"].(map[string]any)["self"] != f.url+"/topics/t/partitions/-/remote-log" {
		t.Fatalf("list: %d %v", st, body)
	}
	data := body["data"].([]any)
	if len(data) != 3 {
		t.Fatalf("list of %d partitions: %v", len(data), data)
	}
	want := []struct{ start, highest, size, segs float64 }{
		{25, 49, 1100, 2},
		{-1, -1, 0, 0},
		{-1, -1, 0, 0}, // the deleted namesake's remote log is not this topic's
	}
	for i, w := range want {
		d := data[i].(map[string]any)
		if d["kind"] != "ShaleRemoteLog" || d["cluster_id"] != "c1" || d["topic_name"] != "t" || d["partition_id"] != float64(i) ||
			d["start_offset"] != w.start || d["highest_offset"] != w.highest || d["size_bytes"] != w.size || d["segments_count"] != w.segs {
			t.Fatalf("partition %d: %v, want %+v", i, d, w)
		}
	}
	st, one := f.call(t, "GET", "/topics/t/partitions/0/remote-log", "", "")
	if st != 200 || one["kind"] != "ShaleRemoteLog" || one["size_bytes"] != float64(1100) || one["segments_count"] != float64(2) ||
		one["metadata"].(map[string]any)["self"] != f.url+"/topics/t/partitions/0/remote-log" ||
		one["metadata"].(map[string]any)["resource_name"] != "crn:///kafka=c1/topic=t/partition=0/remote-log" {
		t.Fatalf("partition 0: %d %v", st, one)
	}
	for _, path := range []string{"/topics/t/partitions/3/remote-log", "/topics/nope/partitions/-/remote-log", "/topics/nope/partitions/0/remote-log"} {
		if st, body := f.call(t, "GET", path, "", ""); st != 404 || body["error_code"] != float64(codeUnknownTopic) {
			t.Fatalf("%s: %d %v", path, st, body)
		}
	}
}

// Reading a topic's remote logs needs DESCRIBE on the topic, as its partitions do.
func TestRemoteLogResourceACLs(t *testing.T) {
	allow := acl.Binding{ResourceType: kmsg.ACLResourceTypeTopic, PatternType: kmsg.ACLResourcePatternTypeLiteral, ResourceName: "t",
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationDescribe, Permission: kmsg.ACLPermissionTypeAllow}
	f := newRemoteLogFixture(t, acl.NewAuthorizer(nil, false), []acl.Binding{allow})
	for _, path := range []string{"/topics/t/partitions/-/remote-log", "/topics/t/partitions/0/remote-log"} {
		if st, body := f.call(t, "GET", path, "bob", ""); st != 403 || body["error_code"] != float64(codeAuthorization) {
			t.Fatalf("bob reads %s: %d %v", path, st, body)
		}
		if st, body := f.call(t, "GET", path, "alice", ""); st != 200 {
			t.Fatalf("alice reads %s: %d %v", path, st, body)
		}
	}
}
