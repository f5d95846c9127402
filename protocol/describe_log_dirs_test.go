package protocol_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// DescribeLogDirs through kadm: this broker's directory with each replica's size, only the
// partitions asked for, the volume's bytes from v4; DESCRIBE on the cluster is required.
func TestDescribeLogDirs(t *testing.T) {
	b := startACLBroker(t, false)
	b.topic(t, "sized")
	b.topic(t, "other")
	for range 5 {
		if err := produceOne(t, b.as("admin"), "sized"); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxTimeout(t, 20*time.Second)
	adm := b.adminAs("admin")
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	dirs := all[1]
	if len(all) != 1 || len(dirs) != 1 {
		t.Fatalf("log dirs: %+v", all)
	}
	for path, d := range dirs {
		if d.Err != nil || !filepath.IsAbs(path) || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Fatalf("dir %q: %+v", path, d)
		}
		sized, ok := d.Topics["sized"][0]
		if !ok || sized.Size <= 0 || sized.OffsetLag != 0 {
			t.Fatalf("sized-0: %+v (ok %v)", sized, ok)
		}
		if other := d.Topics["other"][0]; other.Size != 0 {
			t.Fatalf("an empty partition's size: %d", other.Size)
		}
		if size := d.Size(); size != sized.Size {
			t.Fatalf("dir size %d, want sized-0's %d", size, sized.Size)
		}
	}
	// Only what is asked for.
	some, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{"other": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range some[1] {
		if _, ok := d.Topics["sized"]; ok || len(d.Topics["other"]) != 1 {
			t.Fatalf("asked for other-0, got %+v", d.Topics)
		}
	}
	// Without DESCRIBE on the cluster: Kafka's error from v3, nothing before it.
	if _, err := b.adminAs("alice").DescribeAllLogDirs(ctx, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	// A client of Kafka 2.6 speaks v2.
	rc := b.as("alice", kgo.MaxVersions(kversion.V2_6_0()))
	resp, err := kmsg.NewPtrDescribeLogDirsRequest().RequestWith(ctx, rc)
	if err != nil || resp.Version != 2 || resp.ErrorCode != 0 || len(resp.Dirs) != 0 {
		t.Fatalf("alice at v2: %+v, %v; want no dirs", resp, err)
	}
}
