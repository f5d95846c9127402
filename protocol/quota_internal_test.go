package protocol

import (
	"testing"
	"time"

	"github.com/shalelog/shale/metadata"
)

func TestResolveQuotaPrecedence(t *testing.T) {
	named := func(n string) metadata.QuotaEntityPart { return metadata.QuotaEntityPart{Set: true, Name: n} }
	def := metadata.QuotaEntityPart{Set: true, Default: true}
	p := metadata.QuotaProducerByteRate
	q := metadata.ClientQuotas{
		{User: named("alice"), ClientID: named("app")}: {p: 1},
		{User: named("alice")}:                         {p: 2},
		{User: def, ClientID: def}:                     {p: 3},
		{ClientID: named("tool")}:                      {p: 4},
		{ClientID: def}:                                {p: 5},
	}
	for _, tc := range []struct {
		user, client string
		want         float64
		key          sensorKey
	}{
		{"alice", "app", 1, sensorKey{user: "alice", clientID: "app", hasUser: true, hasID: true}},
		// A user quota is shared by all the user's client ids.
		{"alice", "other", 2, sensorKey{user: "alice", hasUser: true}},
		// <default>/<default> gives each (user, client id) its own sensor.
		{"bob", "tool", 3, sensorKey{user: "bob", clientID: "tool", hasUser: true, hasID: true}},
	} {
		got, key, ok := resolveQuota(q, quotaProduce, tc.user, tc.client)
		if !ok || got != tc.want || key != tc.key {
			t.Errorf("%s/%s: %v %+v %v, want %v %+v", tc.user, tc.client, got, key, ok, tc.want, tc.key)
		}
	}
	// Without user entities, client-id quotas apply.
	delete(q, metadata.QuotaEntity{User: def, ClientID: def})
	if got, _, _ := resolveQuota(q, quotaProduce, "bob", "tool"); got != 4 {
		t.Errorf("client-id tool: %v, want 4", got)
	}
	if got, _, _ := resolveQuota(q, quotaProduce, "bob", "x"); got != 5 {
		t.Errorf("client-id default: %v, want 5", got)
	}
	if _, _, ok := resolveQuota(q, quotaFetch, "alice", "app"); ok {
		t.Error("a fetch quota resolved where only produce quotas are set")
	}
}

func TestQuotaThrottleTime(t *testing.T) {
	m := newQuotaManager(11, time.Second)
	id := "c"
	q := metadata.ClientQuotas{{ClientID: metadata.QuotaEntityPart{Set: true, Name: id}}: {metadata.QuotaProducerByteRate: 1000}}
	now := time.Unix(1000, 0)
	// 10 s of quota fit in the first (minimum 10 s) window without a throttle.
	if d := m.record(q, quotaProduce, "User:u", id, 10000, now); d != 0 {
		t.Fatalf("throttled %v within the quota", d)
	}
	// 5000 bytes more: 15000 at 1000/s is 15 s, 10 s have been counted: wait 5 s.
	if d := m.record(q, quotaProduce, "User:u", id, 5000, now); d != 5*time.Second {
		t.Fatalf("throttle %v, want 5s", d)
	}
	// Far over: capped at the whole window, 11 s.
	if d := m.record(q, quotaProduce, "User:u", id, 1e9, now); d != 11*time.Second {
		t.Fatalf("throttle %v, want the 11s cap", d)
	}
	// Once the samples have aged out the client starts afresh.
	if d := m.record(q, quotaProduce, "User:u", id, 1, now.Add(12*time.Second)); d != 0 {
		t.Fatalf("throttle %v after the window passed", d)
	}
}
