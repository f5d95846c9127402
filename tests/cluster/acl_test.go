package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"

	pb "github.com/shalelog/shale/controller/proto"
)

// With the authorizer on, brokers replicate only when the inter-broker principal has
// CLUSTER_ACTION (here every connection is User:ANONYMOUS: PLAINTEXT, no super user):
// without it the leader refuses and audits the followers' fetches; once an ACL grants it,
// acks=all writes to an RF=3 topic go through.
func TestReplicationNeedsClusterAction(t *testing.T) {
	c := newCluster(t, "--authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer")
	const anon = "User:ANONYMOUS"
	binding := func(typ kmsg.ACLResourceType, name string, op kmsg.ACLOperation) *pb.AclBinding {
		return &pb.AclBinding{ResourceType: int32(typ), ResourceName: name, PatternType: int32(kmsg.ACLResourcePatternTypeLiteral),
			Principal: anon, Host: "*", Operation: int32(op), Permission: int32(kmsg.ACLPermissionTypeAllow)}
	}
	grant := func(bs ...*pb.AclBinding) {
		c.callActive("create ACLs", func(ctx context.Context, cl pb.ControllerClient) error {
			resp, err := cl.CreateAcls(ctx, &pb.CreateAclsRequest{Acls: bs})
			if err == nil && resp.Error != nil {
				t.Fatalf("create ACLs: %v", resp.Error)
			}
			return err
		})
	}
	// Everything a client needs on the topic, nothing on the cluster but CREATE.
	grant(binding(kmsg.ACLResourceTypeTopic, "guarded", kmsg.ACLOperationAll),
		binding(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationCreate))
	createTopic(t, c.brokers[0].addr, newTopic("guarded", 1, 3))

	testutil.Eventually(t, 60*time.Second, "a refused follower fetch in a leader's audit log", func() bool {
		for _, b := range c.brokers {
			for _, line := range strings.Split(b.log(), "\n") {
				if strings.Contains(line, "authorization denied") && strings.Contains(line, "CLUSTER_ACTION") &&
					strings.Contains(line, anon) {
					return true
				}
			}
		}
		return false
	})

	grant(binding(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationClusterAction))
	cl := c.kafkaClient(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d with CLUSTER_ACTION granted: %v", i, err)
		}
	}
	for _, p := range c.waitFullISR("guarded", 60*time.Second) {
		if len(p.isr) != 3 {
			t.Fatalf("ISR %v after replication was allowed", p.isr)
		}
	}
}
