package protocol_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/protocol"
	"github.com/shalelog/shale/security/acl"
)

// recordingHandler keeps the log records a broker writes, for the audit assertions.
type recordingHandler struct {
	mu   sync.Mutex
	recs []map[string]any
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	m := map[string]any{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.Any(); return true })
	h.mu.Lock()
	h.recs = append(h.recs, m)
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) denials() []map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]any
	for _, m := range h.recs {
		if m["msg"] == "authorization denied" {
			out = append(out, m)
		}
	}
	return out
}

// aclBroker is a broker with the authorizer on, whose requests are decided for
// "User:<client id>" (standing in for SASL/TLS). User:admin is the super user.
type aclBroker struct {
	*testBroker
	log *recordingHandler
}

func startACLBroker(t *testing.T, allowIfNoACL bool) *aclBroker {
	t.Helper()
	return startACLBrokerTxn(t, allowIfNoACL, nil)
}

// startACLBrokerTxn is startACLBroker with a transaction coordinator when tcfg is set.
func startACLBrokerTxn(t *testing.T, allowIfNoACL bool, tcfg *txn.Config) *aclBroker {
	t.Helper()
	rec := &recordingHandler{}
	cfg := brokerConfig(withoutAutoCreate())
	cfg.DefaultPartitions = 1
	cfg.Logger = slog.New(rec)
	cfg.Authorizer = acl.NewAuthorizer([]string{"User:admin"}, allowIfNoACL)
	protocol.SetTestPrincipals(&cfg, func(id string) string { return "User:" + id })
	gcfg := group.Config{NodeID: 1, MinSessionTimeout: 100 * time.Millisecond, Logger: quietLogger()}
	return &aclBroker{testBroker: launchTxn(t, t.TempDir(), nil, cfg, &gcfg, tcfg), log: rec}
}

// as returns a client whose requests are decided for User:<user>.
func (b *aclBroker) as(user string, opts ...kgo.Opt) *kgo.Client {
	return b.client(append([]kgo.Opt{kgo.ClientID(user)}, opts...)...)
}

func (b *aclBroker) adminAs(user string) *kadm.Client { return kadm.NewClient(b.as(user)) }

func (b *aclBroker) grant(t *testing.T, builder *kadm.ACLBuilder) {
	t.Helper()
	res, err := b.adminAs("admin").CreateACLs(ctxTimeout(t, 10*time.Second), builder)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func (b *aclBroker) topic(t *testing.T, name string) {
	t.Helper()
	cl := kadm.NewClient(b.as("admin"))
	res, err := cl.CreateTopic(ctxTimeout(t, 10*time.Second), 1, 1, nil, name)
	if err != nil || res.Err != nil {
		t.Fatalf("create topic %s: %v %v", name, err, res.Err)
	}
}

func produceOne(t *testing.T, cl *kgo.Client, topic string) error {
	t.Helper()
	return cl.ProduceSync(ctxTimeout(t, 10*time.Second), &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
}

func TestACLsCreateDescribeDeleteWithKadm(t *testing.T) {
	b := startACLBroker(t, false)
	adm := b.adminAs("admin")
	ctx := ctxTimeout(t, 20*time.Second)

	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("orders").Groups("billing").
		Allow("User:alice").Operations(kadm.OpRead, kadm.OpDescribe))
	if err != nil {
		t.Fatal(err)
	}
	if len(created) != 4 {
		t.Fatalf("created %d ACLs, want 4", len(created))
	}
	if _, err := adm.CreateACLs(ctx, kadm.NewACLs().Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).
		Deny("User:bob").AllowHosts().DenyHosts("10.0.0.1").Operations(kadm.OpWrite)); err != nil {
		t.Fatal(err)
	}
	// Invalid bindings get their own error: a PREFIXED cluster.
	bad := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypePrefixed
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:x", "*", kmsg.ACLOperationAlter, kmsg.ACLPermissionTypeAllow
	bad.Creations = append(bad.Creations, c)
	badResp, err := bad.RequestWith(ctx, b.as("admin"))
	if err != nil {
		t.Fatal(err)
	}
	if code := badResp.Results[0].ErrorCode; code != kerr.InvalidRequest.Code {
		t.Fatalf("prefixed cluster ACL: code %d, want INVALID_REQUEST", code)
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(described[0].Described); n != 5 {
		t.Fatalf("described %d ACLs, want 5: %+v", n, described[0].Described)
	}
	// MATCH finds the prefixed binding that applies to logs-app.
	matched, err := adm.DescribeACLs(ctx, kadm.NewACLs().Topics("logs-app").ResourcePatternType(kadm.ACLPatternMatch).
		Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	if d := matched[0].Described; len(d) != 1 || d[0].Name != "logs-" || d[0].Pattern != kadm.ACLPatternPrefixed ||
		d[0].Permission != kmsg.ACLPermissionTypeDeny || d[0].Host != "10.0.0.1" {
		t.Fatalf("MATCH logs-app: %+v", d)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Topics("orders").Allow("User:alice").AllowHosts().Operations(kadm.OpAny))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(deleted[0].Deleted); n != 2 || deleted[0].Err != nil {
		t.Fatalf("deleted %d (%v), want 2", n, deleted[0].Err)
	}
	// The broker answers DeleteAcls once its image no longer holds them.
	after, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny).
		ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range after[0].Described {
		if d.Name == "orders" {
			t.Fatalf("orders ACL survived deletion: %+v", d)
		}
	}
	if n := len(after[0].Described); n != 3 {
		t.Fatalf("%d ACLs left, want 3", n)
	}

	// Only principals with ALTER/DESCRIBE on the cluster manage ACLs.
	dr, err := b.adminAs("alice").DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err == nil {
		err = dr[0].Err
	}
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice DescribeAcls: %v, want CLUSTER_AUTHORIZATION_FAILED", err)
	}
	res, err := b.adminAs("alice").CreateACLs(ctx, kadm.NewACLs().Topics("x").Allow("User:alice").Operations(kadm.OpAll))
	if err != nil || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice CreateAcls: %v %v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
	}
}

func TestACLsProduceFetchPerOperation(t *testing.T) {
	b := startACLBroker(t, false)
	b.topic(t, "orders")
	b.topic(t, "secret")

	// Without any ACL, alice can neither write nor read (allow.everyone.if.no.acl.found
	// is false).
	alice := b.as("alice", kgo.DisableIdempotentWrite())
	if err := produceOne(t, alice, "orders"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce without ACL: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	b.grant(t, kadm.NewACLs().Topics("orders").Allow("User:alice").Operations(kadm.OpWrite))
	if err := produceOne(t, alice, "orders"); err != nil {
		t.Fatalf("produce with WRITE: %v", err)
	}
	// WRITE on a topic stands for IDEMPOTENT_WRITE (KIP-679): the default idempotent
	// franz-go producer works too.
	if err := produceOne(t, b.as("alice"), "orders"); err != nil {
		t.Fatalf("idempotent produce with WRITE: %v", err)
	}
	// carol has no WRITE anywhere: InitProducerId is refused.
	if err := produceOne(t, b.as("carol"), "orders"); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("carol idempotent produce: %v", err)
	}

	fetch := func(user, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = topic, b.broker.Image().Topic(topic).ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), b.as(user))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := fetch("alice", "orders"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch with only WRITE: code %d, want TOPIC_AUTHORIZATION_FAILED", code)
	}
	b.grant(t, kadm.NewACLs().Topics("orders").Allow("User:alice").Operations(kadm.OpRead))
	if code := fetch("alice", "orders"); code != 0 {
		t.Fatalf("fetch with READ: code %d", code)
	}
	// A DENY wins over the ALLOW.
	b.grant(t, kadm.NewACLs().Topics("orders").Deny("User:alice").Operations(kadm.OpRead))
	if code := fetch("alice", "orders"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch with READ and DENY READ: code %d", code)
	}
	// The super user needs no ACL.
	if code := fetch("admin", "secret"); code != 0 {
		t.Fatalf("super user fetch: code %d", code)
	}
	if err := produceOne(t, b.as("admin"), "secret"); err != nil {
		t.Fatalf("super user produce: %v", err)
	}

	// Every denial is audited with principal, client, API, resource and operation.
	var found bool
	for _, d := range b.log.denials() {
		if d["principal"] == "User:alice" && d["api"] == "Fetch" && d["resource"] == "orders" && d["operation"] == "READ" &&
			d["resource_type"] == "TOPIC" && d["client"] != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit record of alice's denied fetch: %v", b.log.denials())
	}
}

func TestACLsMetadataHidesTopics(t *testing.T) {
	b := startACLBroker(t, false)
	for _, name := range []string{"pub-a", "pub-b", "private"} {
		b.topic(t, name)
	}
	// READ implies DESCRIBE; the prefixed ACL covers both pub- topics.
	b.grant(t, kadm.NewACLs().Topics("pub-").ResourcePatternType(kadm.ACLPatternPrefixed).Allow("User:alice").Operations(kadm.OpRead))

	ctx := ctxTimeout(t, 10*time.Second)
	md, err := kadm.NewClient(b.as("alice")).Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := md.Topics.Names(); !slices.Equal(sortedCopy(got), []string{"pub-a", "pub-b"}) {
		t.Fatalf("alice sees %v, want [pub-a pub-b]", got)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeTopicAuthorizedOperations = true
	for _, n := range []string{"private", "pub-a"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, b.as("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Topics[0].ErrorCode != kerr.TopicAuthorizationFailed.Code || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("explicit private: %+v, want TOPIC_AUTHORIZATION_FAILED and no partitions", resp.Topics[0])
	}
	if resp.Topics[1].ErrorCode != 0 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("explicit pub-a: %+v", resp.Topics[1])
	}
	// KIP-430: alice may READ and (implied) DESCRIBE pub-a, nothing else.
	if ops := resp.Topics[1].AuthorizedOperations; ops != 1<<3|1<<8 {
		t.Fatalf("authorized operations on pub-a: %b, want READ and DESCRIBE", ops)
	}
	// bob sees nothing; the super user everything.
	if md, _ := kadm.NewClient(b.as("bob")).Metadata(ctx); len(md.Topics) != 0 {
		t.Fatalf("bob sees %v", md.Topics.Names())
	}
	if md, _ := kadm.NewClient(b.as("admin")).Metadata(ctx); len(md.Topics.Names()) < 3 {
		t.Fatalf("admin sees %v", md.Topics.Names())
	}
	// Silent filtering of an all-topics request writes no audit record.
	for _, d := range b.log.denials() {
		if d["api"] == "Metadata" && d["resource"] != "private" {
			t.Fatalf("unexpected Metadata audit record %v", d)
		}
	}
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func TestACLsAllowEveryoneIfNoACLFound(t *testing.T) {
	b := startACLBroker(t, true)
	b.topic(t, "open")
	b.topic(t, "guarded")
	b.grant(t, kadm.NewACLs().Topics("guarded").Allow("User:alice").Operations(kadm.OpAll))
	bob := b.as("bob", kgo.DisableIdempotentWrite())
	if err := produceOne(t, bob, "open"); err != nil {
		t.Fatalf("produce to a topic with no ACL: %v", err)
	}
	if err := produceOne(t, bob, "guarded"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce to a topic with an ACL for someone else: %v", err)
	}
}

func TestACLsAdminAndGroupAPIs(t *testing.T) {
	b := startACLBroker(t, false)
	ctx := ctxTimeout(t, 20*time.Second)
	alice := kadm.NewClient(b.as("alice"))

	// CreateTopics needs CREATE on the cluster or the topic.
	res, err := alice.CreateTopic(ctx, 1, 1, nil, "mine")
	if err == nil {
		err = res.Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create without CREATE: %v %v", err, res.Err)
	}
	b.grant(t, kadm.NewACLs().Topics("mine").Allow("User:alice").Operations(kadm.OpCreate, kadm.OpDescribe, kadm.OpDescribeConfigs))
	if res, err := alice.CreateTopic(ctx, 1, 1, nil, "mine"); err != nil || res.Err != nil {
		t.Fatalf("create with CREATE: %v %v", err, res.Err)
	}
	// Configs: DESCRIBE_CONFIGS allowed, ALTER_CONFIGS not.
	if rc, err := alice.DescribeTopicConfigs(ctx, "mine"); err != nil || rc[0].Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc)
	}
	ac, err := alice.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}, "mine")
	if err != nil || !errors.Is(ac[0].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alter configs without ALTER_CONFIGS: %v %v", err, ac)
	}
	if bc, err := alice.DescribeBrokerConfigs(ctx, 1); err == nil && (len(bc) == 0 || !errors.Is(bc[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("broker configs without cluster DESCRIBE_CONFIGS: %v", bc)
	}
	// DeleteTopics needs DELETE.
	dr, err := alice.DeleteTopics(ctx, "mine")
	if err != nil || !errors.Is(dr["mine"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete without DELETE: %v %v", err, dr)
	}
	// ElectLeaders needs ALTER on the cluster.
	if _, err := alice.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"mine": {0: {}}}); err == nil {
		er, _ := alice.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{"mine": {0: {}}})
		if !errors.Is(er["mine"][0].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("elect leaders without ALTER cluster: %+v", er)
		}
	}

	// Groups: committing needs READ on the group and on the topic.
	commit := func(user string) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = "g1", -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = "mine"
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Offset = 0
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, b.as(user))
		var ke *kerr.Error
		if errors.As(err, &ke) { // FindCoordinator needs DESCRIBE on the group
			return ke.Code
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("alice"); code != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("commit without group READ: %d", code)
	}
	b.grant(t, kadm.NewACLs().Groups("g1").Allow("User:alice").Operations(kadm.OpRead))
	if code := commit("alice"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("commit without topic READ: %d", code)
	}
	b.grant(t, kadm.NewACLs().Topics("mine").Allow("User:alice").Operations(kadm.OpRead))
	if code := commit("alice"); code != 0 {
		t.Fatalf("commit with READ on both: %d", code)
	}
	// JoinGroup for a group alice may describe (so FindCoordinator answers) but not read.
	b.grant(t, kadm.NewACLs().Groups("g2").Allow("User:alice").Operations(kadm.OpDescribe))
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "g2", 10000, 10000, "consumer"
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", []byte{}
	join.Protocols = append(join.Protocols, jp)
	jr, err := join.RequestWith(ctx, b.as("alice"))
	if err != nil || jr.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("join g2: %v %+v", err, jr)
	}
	// ListGroups shows alice only the groups she may describe.
	lg, err := alice.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range lg.Groups() {
		if g != "g1" {
			t.Fatalf("alice lists group %q", g)
		}
	}
}

func TestACLAPIsWithoutAuthorizer(t *testing.T) {
	b := startBroker(t)
	dr, err := b.admin().DescribeACLs(ctxTimeout(t, 10*time.Second), kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
	if err == nil {
		err = dr[0].Err
	}
	if !errors.Is(err, kerr.SecurityDisabled) {
		t.Fatalf("DescribeAcls without an authorizer: %v, want SECURITY_DISABLED", err)
	}
}

// A follower's fetch needs CLUSTER_ACTION: without it every partition is refused, with it
// (here through a super user) replication reads as before.
func TestACLsFollowerFetchNeedsClusterAction(t *testing.T) {
	b := startACLBroker(t, false)
	b.topic(t, "r")
	follower := func(user string) int16 {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.ReplicaState.ID, req.MaxBytes, req.SessionEpoch = 2, 2, 1<<20, -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic, ft.TopicID = "r", b.broker.Image().Topic("r").ID
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = 1<<20, -1
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		resp, err := req.RequestWith(ctxTimeout(t, 10*time.Second), b.as(user))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Topics) == 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// The fetcher resets an out-of-range replica with ListOffsets as a replica.
	listOffsets := func(user string) int16 {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = 2
		lt := kmsg.NewListOffsetsRequestTopic()
		lt.Topic = "r"
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Timestamp, lp.CurrentLeaderEpoch = -1, -1
		lt.Partitions = append(lt.Partitions, lp)
		req.Topics = append(req.Topics, lt)
		// Straight to the broker, as the fetcher does: no Metadata first.
		kresp, err := b.as(user).SeedBrokers()[0].Request(ctxTimeout(t, 10*time.Second), req)
		if err != nil {
			t.Fatal(err)
		}
		return kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := follower("broker2"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("follower fetch without CLUSTER_ACTION: %d", code)
	}
	if code := listOffsets("broker2"); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("follower ListOffsets without CLUSTER_ACTION: %d", code)
	}
	// CLUSTER_ACTION alone is enough: no topic ACL is needed.
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:broker2").Operations(kadm.OpClusterAction))
	if code := follower("broker2"); code == kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("follower fetch with CLUSTER_ACTION still refused")
	}
	if code := listOffsets("broker2"); code != 0 {
		t.Fatalf("follower ListOffsets with CLUSTER_ACTION: %d", code)
	}
}

// The quota APIs are cluster configuration: DESCRIBE_CONFIGS and ALTER_CONFIGS on the
// cluster, as Kafka's AuthHelper asks.
func TestACLsClientQuotaAPIs(t *testing.T) {
	b := startACLBroker(t, false)
	ctx := ctxTimeout(t, 20*time.Second)
	alice := kadm.NewClient(b.as("alice"))
	user := "bob"
	entry := []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &user}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1 << 20}},
	}}
	if _, err := alice.DescribeClientQuotas(ctx, false, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe quotas without DESCRIBE_CONFIGS: %v", err)
	}
	if res, err := alice.AlterClientQuotas(ctx, entry); err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter quotas without ALTER_CONFIGS: %v %+v", err, res)
	}
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:alice").Operations(kadm.OpDescribeConfigs, kadm.OpAlterConfigs))
	if res, err := alice.AlterClientQuotas(ctx, entry); err != nil || len(res) != 1 || res[0].Err != nil {
		t.Fatalf("alter quotas with ALTER_CONFIGS: %v %+v", err, res)
	}
	got, err := alice.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(got) != 1 {
		t.Fatalf("describe quotas with DESCRIBE_CONFIGS: %v %+v", err, got)
	}
}

// DescribeUserScramCredentials needs DESCRIBE and AlterUserScramCredentials ALTER on the
// cluster, as in Kafka: without them nothing is listed and no credential changes, so a
// user cannot give itself another user's password (the console's security test found
// both APIs open to anyone authenticated).
func TestACLsScramCredentialAPIs(t *testing.T) {
	b := startACLBroker(t, false)
	ctx := ctxTimeout(t, 20*time.Second)
	alice := kadm.NewClient(b.as("alice"))
	upsert := []kadm.UpsertSCRAM{{User: "admin", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "taken-over"}}
	// kadm reports a per-user refusal either in the user's result or as the call's error.
	if res, err := alice.AlterUserSCRAMs(ctx, nil, upsert); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["admin"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter SCRAM credentials without ALTER on the cluster: %v %+v", err, res)
	}
	if _, err := alice.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe SCRAM credentials without DESCRIBE on the cluster: %v", err)
	}
	if got, err := b.adminAs("admin").DescribeUserSCRAMs(ctx); err != nil || len(got) != 0 {
		t.Fatalf("a refused upsert left credentials: %v %+v", err, got)
	}
	b.grant(t, kadm.NewACLs().Clusters().Allow("User:alice").Operations(kadm.OpAlter, kadm.OpDescribe))
	if res, err := alice.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "carol-secret"}}); err != nil || res["carol"].Err != nil {
		t.Fatalf("alter SCRAM credentials with ALTER on the cluster: %v %+v", err, res)
	}
	if got, err := alice.DescribeUserSCRAMs(ctx); err != nil || len(got) != 1 {
		t.Fatalf("describe SCRAM credentials with DESCRIBE on the cluster: %v %+v", err, got)
	}
}
