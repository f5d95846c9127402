package protocol_test

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/testutil"
	"github.com/shalelog/shale/protocol"
)

func withQuotaWindow(n int, size time.Duration) brokerOpt {
	return func(c *protocol.Config) { c.QuotaWindowNum, c.QuotaWindowSize = n, size }
}

func setQuota(t *testing.T, adm *kadm.Client, entity kadm.ClientQuotaEntity, key string, value float64) {
	t.Helper()
	res, err := adm.AlterClientQuotas(ctxTimeout(t, 10*time.Second), []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{{Key: key, Value: value}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("alter %v: %v", r.Entity, r.Err)
		}
	}
}

func TestClientQuotasAlterDescribe(t *testing.T) {
	tb := startBroker(t)
	adm := tb.admin()
	app, alice := "app", "alice"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, "producer_byte_rate", 1024)
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &alice}, {Type: "client-id"}}, "request_percentage", 25.5)
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user"}}, "consumer_byte_rate", 4096)

	ctx := ctxTimeout(t, 10*time.Second)
	all, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(all) != 3 {
		t.Fatalf("describe all: %v %v", all, err)
	}
	// Strict: only entities made of exactly a user component.
	users, err := adm.DescribeClientQuotas(ctx, true, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: kmsg.QuotasMatchTypeAny}})
	if err != nil || len(users) != 1 || users[0].Entity[0].Name != nil || users[0].Values[0].Value != 4096 {
		t.Fatalf("describe users strictly: %+v %v", users, err)
	}
	byName, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: &alice}})
	if err != nil || len(byName) != 1 || byName[0].Values[0].Key != "request_percentage" || byName[0].Values[0].Value != 25.5 {
		t.Fatalf("describe user alice: %+v %v", byName, err)
	}

	// Removing the last value removes the entity; bad keys and values are refused.
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: &app}}, Ops: []kadm.AlterClientQuotaOp{{Key: "bogus", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: -5}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "ip", Name: &alice}}, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 5}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatalf("remove: %v", res[0].Err)
	}
	for _, r := range res[1:] {
		if !errors.Is(r.Err, kerr.InvalidRequest) {
			t.Errorf("%v: %v, want INVALID_REQUEST", r.Entity, r.Err)
		}
	}
	if all, err := adm.DescribeClientQuotas(ctx, false, nil); err != nil || len(all) != 2 {
		t.Fatalf("after remove: %+v %v", all, err)
	}
}

// TestProduceQuotaHoldsByteRate: a producer under a producer_byte_rate quota keeps to
// within 20% of it, measured over a few seconds once its first burst has passed. A
// quota holds a rate over its window (here 6 samples of 100ms), so over a measurement
// of length L the rate can differ from it by up to about window/L: L is 8s.
func TestProduceQuotaHoldsByteRate(t *testing.T) {
	const rate = 256 << 10
	tb := startBroker(t, withQuotaWindow(6, 100*time.Millisecond))
	tb.createTopic("limited", 1, nil)
	id := "limited-producer"
	setQuota(t, tb.admin(), kadm.ClientQuotaEntity{{Type: "client-id", Name: &id}}, "producer_byte_rate", rate)

	hook := &throttleHook{}
	cl := tb.client(kgo.ClientID(id), kgo.DefaultProduceTopic("limited"), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0), kgo.MaxBufferedRecords(8), kgo.ProducerBatchMaxBytes(20<<10), kgo.WithHooks(hook))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var acked atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			val := make([]byte, 8<<10)
			rand.Read(val)
			cl.Produce(ctx, &kgo.Record{Value: val}, func(r *kgo.Record, err error) {
				if err == nil {
					acked.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	time.Sleep(2 * time.Second) // past the first burst and a window of samples
	start, t0 := acked.Load(), time.Now()
	time.Sleep(8 * time.Second)
	got := float64(acked.Load()-start) / time.Since(t0).Seconds()
	cancel()
	wg.Wait()
	t.Logf("throttles %d total %v", hook.n.Load(), time.Duration(hook.total.Load()))
	t.Logf("produced %.0f B/s under a %d B/s quota (%.2f)", got, rate, got/rate)
	if hook.n.Load() == 0 {
		t.Fatal("no response carried throttle_time_ms")
	}
	if got < 0.8*rate || got > 1.2*rate {
		t.Fatalf("produced %.0f B/s, want within 20%% of %d", got, rate)
	}
}

// throttleHook counts the throttle_time_ms the client is told of.
type throttleHook struct{ n, total atomic.Int64 }

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	h.n.Add(1)
	h.total.Add(int64(d))
}

// TestQuotasByUserThrottleEveryKind: user quotas of each kind reach the principal's
// requests: produce, fetch and request time each come back with throttle_time_ms.
func TestQuotasByUserThrottleEveryKind(t *testing.T) {
	tb := startBroker(t, func(c *protocol.Config) { protocol.SetTestPrincipal(c, "User:alice") })
	tb.createTopic("by-user", 1, nil)
	adm := tb.admin()
	alice := "alice"
	user := kadm.ClientQuotaEntity{{Type: "user", Name: &alice}}
	// Another user's quota must not touch alice.
	bob := "bob"
	setQuota(t, adm, kadm.ClientQuotaEntity{{Type: "user", Name: &bob}}, "producer_byte_rate", 1)

	val := make([]byte, 64<<10)
	rand.Read(val)
	produce := func(hook *throttleHook) {
		cl := tb.client(kgo.DefaultProduceTopic("by-user"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(hook))
		for range 4 {
			if err := cl.ProduceSync(ctxTimeout(t, 20*time.Second), &kgo.Record{Value: val}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	free := &throttleHook{}
	produce(free)
	if free.n.Load() != 0 {
		t.Fatalf("throttled by another user's quota (%d times)", free.n.Load())
	}

	// 256 KiB at 16 KiB/s is far past what the 10 s minimum window allows.
	setQuota(t, adm, user, "producer_byte_rate", 16<<10)
	held := &throttleHook{}
	produce(held)
	if held.n.Load() == 0 {
		t.Fatal("produce past alice's producer_byte_rate was not throttled")
	}

	setQuota(t, adm, user, "consumer_byte_rate", 16<<10)
	fetched := &throttleHook{}
	consumer := tb.client(kgo.ConsumeTopics("by-user"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(fetched))
	for got := 0; got < 8; {
		fs := consumer.PollFetches(ctxTimeout(t, 20*time.Second))
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	testutil.Eventually(t, 20*time.Second, "a fetch response with throttle_time_ms", func() bool { return fetched.n.Load() > 0 })

	// request_percentage: a vanishing share of handler time throttles any request.
	setQuota(t, adm, user, "request_percentage", 0.0001)
	reqs := &throttleHook{}
	cl := tb.client(kgo.WithHooks(reqs))
	testutil.Eventually(t, 20*time.Second, "a request throttled by request_percentage", func() bool {
		kadm.NewClient(cl).ListTopics(ctxTimeout(t, 5*time.Second))
		return reqs.n.Load() > 0
	})
}
