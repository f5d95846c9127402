package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchReq builds a consumer fetch that waits for nothing.
func fetchReq(version int16, sessionID, epoch int32, topic string, offsets map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = version
	req.ReplicaID = -1
	req.MaxBytes = 1 << 20
	req.SessionID, req.SessionEpoch = sessionID, epoch
	if len(offsets) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic = topic
		for p := int32(0); p < 16; p++ {
			off, ok := offsets[p]
			if !ok {
				continue
			}
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch, fp.LastFetchedEpoch = p, off, 1<<20, -1, -1
			t.Partitions = append(t.Partitions, fp)
		}
		req.Topics = append(req.Topics, t)
	}
	return req
}

// fetched maps each partition in a response to how many record bytes it carried.
func fetched(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
			}
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

// A full fetch with session id -1 and epoch -1 (what segmentio/kafka-go's Client.Fetch
// sends) wants no session: Kafka serves it as a sessionless full fetch.
func TestFetchSessionlessWithSessionIDMinusOne(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("nosess", 1, nil)
	rc := dialRaw(t, tb.addr)
	if p := produceRaw(t, rc, "nosess", 0, makeBatch(t, -1, -1, -1, 1, 10)); p.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(p.ErrorCode))
	}
	resp := rc.roundTrip(fetchReq(11, -1, -1, "nosess", map[int32]int64{0: 0})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 {
		t.Fatalf("top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if resp.SessionID != 0 {
		t.Fatalf("session id %d for a sessionless fetch", resp.SessionID)
	}
	if got := fetched(t, resp); got[0] == 0 {
		t.Fatalf("no records: %v", got)
	}
}

// An incremental fetch answers only the partitions that changed, follows the fetch
// positions the fetcher updates, forgets what it is told to, and checks the epoch.
func TestFetchSessionIncremental(t *testing.T) {
	for _, version := range []int16{7, 12, 13} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			tb := startBroker(t)
			tb.createTopic("inc", 3, nil)
			rc := dialRaw(t, tb.addr)
			produce := func(p int32) {
				t.Helper()
				if r := produceRaw(t, rc, "inc", p, makeBatch(t, -1, -1, -1, 1, 10)); r.ErrorCode != 0 {
					t.Fatal(kerr.ErrorForCode(r.ErrorCode))
				}
			}
			var topicID [16]byte
			if im := tb.broker.Image(); im.Topic("inc") != nil {
				topicID = im.Topic("inc").ID
			}
			req := func(sessionID, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchResponse {
				t.Helper()
				r := fetchReq(version, sessionID, epoch, "inc", offsets)
				if version >= 13 {
					for i := range r.Topics {
						r.Topics[i].TopicID = topicID
					}
				}
				if len(forget) > 0 {
					ft := kmsg.NewFetchRequestForgottenTopic()
					ft.Topic, ft.TopicID, ft.Partitions = "inc", topicID, forget
					r.ForgottenTopics = append(r.ForgottenTopics, ft)
				}
				return rc.roundTrip(r).(*kmsg.FetchResponse)
			}
			for p := int32(0); p < 3; p++ {
				produce(p)
			}

			full := req(0, 0, map[int32]int64{0: 1, 1: 1, 2: 1})
			if full.ErrorCode != 0 || full.SessionID == 0 {
				t.Fatalf("full fetch: error %d, session %d", full.ErrorCode, full.SessionID)
			}
			if got := fetched(t, full); len(got) != 3 {
				t.Fatalf("full fetch answered %v, want all 3 partitions", got)
			}
			id := full.SessionID

			produce(1)
			inc := req(id, 1, nil)
			if inc.ErrorCode != 0 || inc.SessionID != id {
				t.Fatalf("incremental: error %d, session %d", inc.ErrorCode, inc.SessionID)
			}
			if got := fetched(t, inc); len(got) != 1 || got[1] == 0 {
				t.Fatalf("incremental fetch answered %v, want only partition 1 with records", got)
			}
			if version >= 13 && inc.Topics[0].TopicID != topicID {
				t.Fatalf("topic id %x", inc.Topics[0].TopicID)
			}

			if r := req(id, 1, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
				t.Fatalf("reused epoch: %v", kerr.ErrorForCode(r.ErrorCode))
			}

			// Partition 1 moves on; partition 2 is forgotten, so its new record is not
			// sent.
			produce(2)
			if got := fetched(t, req(id, 2, map[int32]int64{1: 2}, 2)); len(got) != 0 {
				t.Fatalf("nothing new, answered %v", got)
			}
			produce(0)
			if got := fetched(t, req(id, 3, nil)); len(got) != 1 || got[0] == 0 {
				t.Fatalf("answered %v, want only partition 0", got)
			}

			if r := req(id+1, 4, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("unknown session: %v", kerr.ErrorForCode(r.ErrorCode))
			}
			// Epoch -1 closes the session and is answered as a sessionless full fetch.
			closing := req(id, -1, map[int32]int64{0: 0})
			if closing.ErrorCode != 0 || closing.SessionID != 0 {
				t.Fatalf("closing fetch: error %d, session %d", closing.ErrorCode, closing.SessionID)
			}
			if got := fetched(t, closing); got[0] == 0 {
				t.Fatalf("closing fetch answered %v", got)
			}
			if r := req(id, 4, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
				t.Fatalf("closed session: %v", kerr.ErrorForCode(r.ErrorCode))
			}
		})
	}
}

// A session's long poll waits like any fetch and wakes on an append to one of its
// partitions, answering only that partition.
func TestFetchSessionLongPoll(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("lp", 2, nil)
	rc := dialRaw(t, tb.addr)
	full := rc.roundTrip(fetchReq(12, 0, 0, "lp", map[int32]int64{0: 0, 1: 0})).(*kmsg.FetchResponse)
	if full.SessionID == 0 {
		t.Fatal("no session")
	}
	r := fetchReq(12, full.SessionID, 1, "lp", nil)
	r.MaxWaitMillis, r.MinBytes = 10_000, 1
	corr := rc.send(r)
	time.Sleep(100 * time.Millisecond)
	cl := tb.client(kgo.DefaultProduceTopic("lp"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(ctxTimeout(t, 5*time.Second), &kgo.Record{Partition: 1, Value: []byte("wake")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, body, err := rc.readBody()
	if err != nil || got != corr {
		t.Fatal(err)
	}
	resp := r.ResponseKind().(*kmsg.FetchResponse)
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	if parts := fetched(t, resp); len(parts) != 1 || parts[1] == 0 {
		t.Fatalf("answered %v, want partition 1 only", parts)
	}
}

// franz-go keeps a fetch session; its consumer must see every record.
func TestFetchSessionFranzGoConsumes(t *testing.T) {
	tb := startBroker(t)
	tb.createTopic("fz", 4, nil)
	const n = 400
	prod := tb.client(kgo.DefaultProduceTopic("fz"))
	ctx := ctxTimeout(t, 30*time.Second)
	produce := func(from int) {
		for i := from; i < from+n/2; i++ {
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
		}
		if err := prod.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)
	cons := tb.client(kgo.ConsumeTopics("fz"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]bool{}
	consume := func(want int) {
		t.Helper()
		for len(seen) < want {
			fs := cons.PollFetches(ctx)
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", len(seen), want, err)
			}
			fs.EachError(func(_ string, _ int32, err error) { t.Fatal(err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
	}
	consume(n / 2)
	produce(n / 2)
	consume(n)
	if tb.srv.FetchSessions() == 0 {
		t.Fatal("franz-go's consumer holds no fetch session")
	}
}
