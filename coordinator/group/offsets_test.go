package group

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
)

func offsets(topic string, kv ...int64) []metadata.CommittedOffset {
	var out []metadata.CommittedOffset
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, metadata.CommittedOffset{Topic: topic, Partition: int32(kv[i]), Offset: kv[i+1], LeaderEpoch: -1})
	}
	return out
}

func fetched(t *testing.T, c *Coordinator, group string) map[string]int64 {
	t.Helper()
	offs, err := c.FetchOffsets(context.Background(), group, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, o := range offs {
		out[o.Topic+"/"+string(rune('0'+o.Partition))] = o.Offset
	}
	return out
}

func TestSimpleCommit(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	errs, err := c.CommitOffsets(ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: offsets("t", 0, 10, 1, 20)})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("simple commit: %v %v", errs, err)
	}
	if got := fetched(t, c, "simple"); got["t/0"] != 10 || got["t/1"] != 20 || len(got) != 2 {
		t.Fatalf("fetched %v", got)
	}
	// A generation for a group this coordinator never formed.
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "nogroup", MemberID: "m", Generation: 3, Offsets: offsets("t", 0, 1)}); err != kerr.IllegalGeneration {
		t.Fatalf("commit with unknown generation: %v", err)
	}
	// Per-partition validation.
	long := offsets("t", 2, 5)
	long[0].Metadata = strings.Repeat("x", 5000)
	in := append(append(offsets("nope", 0, 1), offsets("t", 99, 1)...), long...)
	errs, err = c.CommitOffsets(ctx, CommitRequest{Group: "simple", Generation: -1, Offsets: in})
	if err != nil || errs[0] != kerr.UnknownTopicOrPartition || errs[1] != kerr.UnknownTopicOrPartition || errs[2] != kerr.OffsetMetadataTooLarge {
		t.Fatalf("invalid partitions: %v %v", errs, err)
	}
}

func TestMemberCommits(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	ids := stableGroup(t, c, "g", 2)
	_, gen, _ := c.stateOf("g")
	commit := func(req CommitRequest) error {
		req.Group = "g"
		req.Offsets = offsets("t", 0, 42)
		errs, err := c.CommitOffsets(ctx, req)
		if err != nil {
			return err
		}
		return errs[0]
	}
	if err := commit(CommitRequest{MemberID: ids[0], Generation: gen}); err != nil {
		t.Fatalf("member commit: %v", err)
	}
	for name, tc := range map[string]struct {
		req  CommitRequest
		want error
	}{
		"simple on a live group": {CommitRequest{Generation: -1}, kerr.UnknownMemberID},
		"unknown member":         {CommitRequest{MemberID: "ghost", Generation: gen}, kerr.UnknownMemberID},
		"old generation":         {CommitRequest{MemberID: ids[1], Generation: gen - 1}, kerr.IllegalGeneration},
		"unknown instance":       {CommitRequest{MemberID: ids[1], InstanceID: "x", Generation: gen}, kerr.FencedInstanceID},
	} {
		if err := commit(tc.req); err != tc.want {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// During PreparingRebalance commits are still accepted.
	third := joinNew(t, c, joinReq("g", ""))
	if err := commit(CommitRequest{MemberID: ids[1], Generation: gen}); err != nil {
		t.Fatalf("commit while preparing: %v", err)
	}
	a := c.Join(joinReq("g", ids[0]))
	b := c.Join(joinReq("g", ids[1]))
	for _, call := range []*JoinCall{a, b, third} {
		if r := wait[JoinResult](t, call); r.Err != nil {
			t.Fatal(r)
		}
	}
	// CompletingRebalance: the member must sync first.
	if err := commit(CommitRequest{MemberID: ids[1], Generation: gen + 1}); err != kerr.RebalanceInProgress {
		t.Fatalf("commit while completing: %v", err)
	}
}

func TestFetchOffsetsFilters(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	in := append(offsets("t", 0, 1, 1, 2), offsets("u", 0, 3)...)
	in[0].Metadata = "meta"
	in[0].LeaderEpoch = 7
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "g", Generation: -1, Retention: time.Hour, Offsets: in}); err != nil {
		t.Fatal(err)
	}
	offs, err := c.FetchOffsets(ctx, "g", map[string][]int32{"t": {0, 3}})
	if err != nil || len(offs) != 1 || offs[0].Offset != 1 || offs[0].Metadata != "meta" || offs[0].LeaderEpoch != 7 || offs[0].ExpireTime.IsZero() {
		t.Fatalf("fetch t/0,3: %+v %v", offs, err)
	}
	if got := fetched(t, c, "g"); len(got) != 3 {
		t.Fatalf("fetch all: %v", got)
	}
	if got := fetched(t, c, "none"); len(got) != 0 {
		t.Fatalf("fetch of a group without offsets: %v", got)
	}
}

func TestDeleteOffsets(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t))
	ctx := context.Background()
	ids := stableGroup(t, c, "g", 1) // subscribed to t
	_, gen, _ := c.stateOf("g")
	if _, err := c.CommitOffsets(ctx, CommitRequest{Group: "g", MemberID: ids[0], Generation: gen, Offsets: append(offsets("t", 0, 1), offsets("u", 0, 2)...)}); err != nil {
		t.Fatal(err)
	}
	res, err := c.DeleteOffsets(ctx, "g", map[string][]int32{"t": {0}, "u": {0}, "nope": {0}})
	if err != nil || res["t"][0] != kerr.GroupSubscribedToTopic || res["u"][0] != nil || res["nope"][0] != kerr.UnknownTopicOrPartition {
		t.Fatalf("delete offsets: %v %v", res, err)
	}
	if got := fetched(t, c, "g"); len(got) != 1 || got["t/0"] != 1 {
		t.Fatalf("left: %v", got)
	}
	if _, err := c.DeleteOffsets(ctx, "missing", map[string][]int32{"t": {0}}); err != kerr.GroupIDNotFound {
		t.Fatalf("missing group: %v", err)
	}
	// Once empty, everything may go.
	if _, err := c.Leave("g", []LeavingMember{{MemberID: ids[0]}}); err != nil {
		t.Fatal(err)
	}
	res, err = c.DeleteOffsets(ctx, "g", map[string][]int32{"t": {0}})
	if err != nil || res["t"][0] != nil {
		t.Fatalf("delete from empty group: %v %v", res, err)
	}
	if got := fetched(t, c, "g"); len(got) != 0 {
		t.Fatalf("left: %v", got)
	}
}

// TestOffsetMetadataLimitIsTheCoordinators: offset.metadata.max.bytes is applied in one
// place, the coordinator, per partition. A commit whose metadata is within the
// configured limit but above Kafka's default of 4096 (which the controller used to apply
// on its own, to the whole commit) is stored, beside the partition over the limit, which
// alone gets OFFSET_METADATA_TOO_LARGE; and with the default limit, 4096 bytes pass and
// 4097 do not.
func TestOffsetMetadataLimitIsTheCoordinators(t *testing.T) {
	ctx := context.Background()
	commit := func(c *Coordinator, group string, sizes ...int) []error {
		t.Helper()
		var in []metadata.CommittedOffset
		for i, n := range sizes {
			o := offsets("t", int64(i), int64(10+i))
			o[0].Metadata = strings.Repeat("m", n)
			in = append(in, o...)
		}
		errs, err := c.CommitOffsets(ctx, CommitRequest{Group: group, Generation: -1, Offsets: in})
		if err != nil {
			t.Fatal(err)
		}
		return errs
	}
	stored := func(c *Coordinator, group string) map[int32]int {
		t.Helper()
		offs, err := c.FetchOffsets(ctx, group, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int{}
		for _, o := range offs {
			out[o.Partition] = len(o.Metadata)
		}
		return out
	}
	store := newTestStore(t)

	cfg := testConfig()
	cfg.OffsetMetadataMaxBytes = 8192
	c := newTestCoordinator(t, cfg, store)
	errs := commit(c, "wide", 5000, 8192, 8193, 10)
	if errs[0] != nil || errs[1] != nil || errs[2] != kerr.OffsetMetadataTooLarge || errs[3] != nil {
		t.Fatalf("offset.metadata.max.bytes=8192, metadata of 5000, 8192, 8193 and 10 bytes: %v", errs)
	}
	if got := stored(c, "wide"); len(got) != 3 || got[0] != 5000 || got[1] != 8192 || got[3] != 10 {
		t.Fatalf("stored metadata sizes %v", got)
	}

	d := newTestCoordinator(t, testConfig(), store) // Kafka's default, 4096
	errs = commit(d, "default", 4096, 4097, 10)
	if errs[0] != nil || errs[1] != kerr.OffsetMetadataTooLarge || errs[2] != nil {
		t.Fatalf("default limit, metadata of 4096, 4097 and 10 bytes: %v", errs)
	}
	if got := stored(d, "default"); len(got) != 2 || got[0] != 4096 || got[2] != 10 {
		t.Fatalf("stored metadata sizes %v", got)
	}

	// Kafka counts String.length(), UTF-16 code units: 4096 'é' (8192 bytes) fit, as do
	// 2048 '😀' (surrogate pairs, also 8192 bytes); one more unit does not.
	in := offsets("t", 0, 1)
	in = append(in, offsets("t", 1, 1)...)
	in = append(in, offsets("t", 2, 1)...)
	in[0].Metadata = strings.Repeat("é", 4096)
	in[1].Metadata = strings.Repeat("😀", 2048)
	in[2].Metadata = strings.Repeat("😀", 2048) + "a"
	errs, err := d.CommitOffsets(ctx, CommitRequest{Group: "utf16", Generation: -1, Offsets: in})
	if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != kerr.OffsetMetadataTooLarge {
		t.Fatalf("default limit, non-ASCII metadata of 4096, 4096 and 4097 UTF-16 units: %v %v", errs, err)
	}
	if got := stored(d, "utf16"); len(got) != 2 || got[0] != 8192 || got[1] != 8192 {
		t.Fatalf("stored metadata sizes %v", got)
	}
}

// TxnOffsetCommit measures metadata as OffsetCommit does (UTF-16 code units, Kafka's
// String.length()), and hands only the offsets within the limit to the transaction.
func TestTxnOffsetMetadataLimit(t *testing.T) {
	c := newTestCoordinator(t, testConfig(), newTestStore(t)) // Kafka's default, 4096
	in := offsets("t", 0, 1)
	in = append(in, offsets("t", 1, 1)...)
	in = append(in, offsets("t", 2, 1)...)
	in[0].Metadata = strings.Repeat("日", 4096) // 12288 bytes, 4096 units
	in[1].Metadata = strings.Repeat("😀", 2048) + "a"
	in[2].Metadata = strings.Repeat("m", 4097)
	var written []metadata.CommittedOffset
	write := func(_ context.Context, _ metadata.GroupFence, offs []metadata.CommittedOffset) error {
		written = append(written, offs...)
		return nil
	}
	errs, err := c.CommitTxnOffsets(t.Context(), CommitRequest{Group: "txn", Generation: -1, Offsets: in}, write)
	if err != nil || errs[0] != nil || errs[1] != kerr.OffsetMetadataTooLarge || errs[2] != kerr.OffsetMetadataTooLarge {
		t.Fatalf("metadata of 4096, 4097 and 4097 UTF-16 units: %v %v", errs, err)
	}
	if len(written) != 1 || written[0].Partition != 0 {
		t.Fatalf("written %+v, want partition 0 alone", written)
	}
}
