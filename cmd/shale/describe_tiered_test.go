package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/security/httpauth"
	"github.com/shalelog/shale/server/restproxy"
)

// fixedImages serves one metadata image to the REST proxy.
type fixedImages struct{ im *metadata.Image }

func (f fixedImages) Current() *metadata.Image { return f.im }
func (f fixedImages) Watch(ctx context.Context) <-chan *metadata.Image {
	return make(chan *metadata.Image)
}

// TestDescribeTieredRemoteSize: a kfake broker whose DescribeConfigs says topic
// "tiered" has remote.storage.enable, and a real REST proxy over an image that holds the
// topic's remote logs. With --rest-url (and its basic authentication) each tiered
// partition's line ends with the remote log's size; without it the lines have none and
// one hint says how to get it; a proxy that cannot answer fails the command, after the
// lines.
func TestDescribeTieredRemoteSize(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "tiered"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeConfigsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, rr := range req.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			cfg := kmsg.NewDescribeConfigsResponseResourceConfig()
			cfg.Name, cfg.Value, cfg.Source = "remote.storage.enable", kmsg.StringPtr("true"), kmsg.ConfigSourceDynamicTopicConfig
			res.Configs = append(res.Configs, cfg)
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
	b := "--bootstrap-server=" + c.ListenAddrs()[0]

	id := [16]byte{1}
	seg := func(upload string, base, end, size int64, st metadata.RemoteSegmentState) metadata.RemoteSegment {
		return metadata.RemoteSegment{TopicID: id, UploadID: upload, BaseOffset: base, EndOffset: end, SizeBytes: size, State: st}
	}
	im := &metadata.Image{ClusterID: "c9", ControllerID: 0, Topics: map[string]*metadata.Topic{
		"tiered": {Name: "tiered", ID: id, Partitions: []metadata.Partition{{Leader: 0, Replicas: []int32{0}}, {Leader: 0, Replicas: []int32{0}}}},
	}, RemoteLogs: metadata.RemoteLogs{
		{Topic: "tiered", Partition: 0}: metadata.NewRemoteLog("tiered", id, 0, 0, []metadata.RemoteSegment{
			seg("a", 0, 9, 5, metadata.RemoteSegmentDeleteStarted), seg("b", 10, 19, 100, metadata.RemoteSegmentCommitted),
			seg("c", 20, 29, 1000, metadata.RemoteSegmentCommitted)}),
	}}
	proxy, err := restproxy.New(restproxy.Options{Images: fixedImages{im}, Kafka: []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)},
		Wrap: func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != "ops" || p != "secret" {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				h.ServeHTTP(w, r.WithContext(httpauth.WithPrincipal(r.Context(), "User:ops")))
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	hs := httptest.NewServer(proxy.Handler())
	t.Cleanup(hs.Close)
	rest := []string{"--rest-url", hs.URL, "--user", "ops", "--password", "secret"}

	const hint = "add --rest-url"
	partLine := func(out string, p string) string {
		t.Helper()
		for _, l := range lines(out) {
			if strings.HasPrefix(l, "\tTopic: tiered\tPartition: "+p+"\t") {
				return l
			}
		}
		t.Fatalf("no line for partition %s in %q", p, out)
		return ""
	}

	r := shale(t, "", append([]string{"topic", "describe", b, "--topic", "tiered"}, rest...)...)
	if r.code != exitOK || strings.Contains(r.stderr, hint) {
		t.Fatalf("with --rest-url: %+v", r)
	}
	for p, want := range map[string]string{"0": "\tRemoteSizeBytes: 1100\tRemoteSegments: 2", "1": "\tRemoteSizeBytes: 0\tRemoteSegments: 0"} {
		if l := partLine(r.stdout, p); !strings.Contains(l, "\tLocalSizeBytes: ") || !strings.HasSuffix(l, want) {
			t.Errorf("partition %s: %q, want the tiered columns ending with %q", p, l, want)
		}
	}

	r = shale(t, "", "topic", "describe", b, "--topic", "tiered")
	if r.code != exitOK || strings.Count(r.stderr, hint) != 1 || strings.Contains(r.stdout, "RemoteSize") {
		t.Fatalf("without --rest-url: %+v", r)
	}
	if l := partLine(r.stdout, "0"); !strings.Contains(l, "\tLocalSizeBytes: ") {
		t.Errorf("without --rest-url, partition 0: %q", l)
	}

	// Wrong credentials: the proxy refuses, the command says so and fails, after the
	// lines it could print.
	r = shale(t, "", "topic", "describe", b, "--topic", "tiered", "--rest-url", hs.URL, "--user", "ops", "--password", "wrong")
	if r.code != exitFailed || !strings.Contains(r.stderr, "remote log size of topic tiered") || strings.Contains(r.stdout, "RemoteSize") ||
		!strings.Contains(partLine(r.stdout, "1"), "\tLocalSizeBytes: ") {
		t.Fatalf("refused by the proxy: %+v", r)
	}
}
