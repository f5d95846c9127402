package protocol

import (
	"encoding/binary"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/metadata"
)

// Client quotas, enforced as Kafka's ClientQuotaManager and ClientRequestQuotaManager do:
// each request is charged to a sensor (a sampled rate) picked by the most specific quota
// entity that sets the quota; a client over its quota gets throttle_time_ms in the
// response and its connection reads nothing more until that time has passed.

// quotaKind is one enforced quota type.
type quotaKind int

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
)

func (k quotaKind) key() string {
	switch k {
	case quotaProduce:
		return metadata.QuotaProducerByteRate
	case quotaFetch:
		return metadata.QuotaConsumerByteRate
	default:
		return metadata.QuotaRequestPercentage
	}
}

// sensorKey names one sensor: the kind and the user and client id the matched entity
// covers ("" for a part the entity does not have, so that, say, a user quota is shared
// by all the user's client ids while a client-id default gives each id its own).
type sensorKey struct {
	kind           quotaKind
	user, clientID string
	hasUser, hasID bool
}

// rateSensor is Kafka's sampled Rate: samples of one window each, the oldest dropped
// once samples*window old.
type rateSensor struct {
	starts   []time.Time
	values   []float64
	cur      int
	lastUsed time.Time
}

func newRateSensor(samples int, now time.Time) *rateSensor {
	s := &rateSensor{starts: make([]time.Time, samples), values: make([]float64, samples)}
	s.starts[0] = now
	return s
}

func (s *rateSensor) record(v float64, now time.Time, window time.Duration) {
	if now.Sub(s.starts[s.cur]) >= window {
		s.cur = (s.cur + 1) % len(s.starts)
		s.starts[s.cur], s.values[s.cur] = now, 0
	}
	s.values[s.cur] += v
	s.lastUsed = now
}

// measure returns the recorded total and the time it is spread over: at least
// samples-1 windows, as in Kafka, so that a new client's first burst is not a rate.
func (s *rateSensor) measure(now time.Time, window time.Duration) (total float64, elapsed time.Duration) {
	n := len(s.starts)
	oldest := now
	for i := range n {
		if s.starts[i].IsZero() {
			continue
		}
		if now.Sub(s.starts[i]) >= time.Duration(n)*window {
			s.starts[i], s.values[i] = time.Time{}, 0
			if i == s.cur {
				s.starts[i] = now
			}
			continue
		}
		total += s.values[i]
		if s.starts[i].Before(oldest) {
			oldest = s.starts[i]
		}
	}
	elapsed = now.Sub(oldest)
	if min := time.Duration(n-1) * window; elapsed < min {
		elapsed = min
	}
	return total, elapsed
}

// quotaManager keeps the sensors of every client that has a quota.
type quotaManager struct {
	samples int
	window  time.Duration

	mu        sync.Mutex
	sensors   map[sensorKey]*rateSensor
	lastSweep time.Time
}

func newQuotaManager(samples int, window time.Duration) *quotaManager {
	return &quotaManager{samples: samples, window: window, sensors: map[sensorKey]*rateSensor{}}
}

// principalName is the user a quota entity names: the principal without its type.
func principalName(p string) string {
	if _, name, ok := strings.Cut(p, ":"); ok {
		return name
	}
	return p
}

// resolveQuota finds the quota of kind for a user and client id in Kafka's order of
// precedence, returning the quota and the sensor it is charged to.
func resolveQuota(q metadata.ClientQuotas, kind quotaKind, user, clientID string) (float64, sensorKey, bool) {
	if len(q) == 0 {
		return 0, sensorKey{}, false
	}
	named := func(n string) metadata.QuotaEntityPart { return metadata.QuotaEntityPart{Set: true, Name: n} }
	def := metadata.QuotaEntityPart{Set: true, Default: true}
	none := metadata.QuotaEntityPart{}
	for _, e := range [...]metadata.QuotaEntity{
		{User: named(user), ClientID: named(clientID)},
		{User: named(user), ClientID: def},
		{User: named(user)},
		{User: def, ClientID: named(clientID)},
		{User: def, ClientID: def},
		{User: def},
		{User: none, ClientID: named(clientID)},
		{User: none, ClientID: def},
	} {
		if v, ok := q[e][kind.key()]; ok {
			k := sensorKey{kind: kind, hasUser: e.User.Set, hasID: e.ClientID.Set}
			if k.hasUser {
				k.user = user
			}
			if k.hasID {
				k.clientID = clientID
			}
			return v, k, true
		}
	}
	return 0, sensorKey{}, false
}

// record charges v to the client's quota of kind and returns how long the client must
// be throttled: the time until its rate over the window is back at the quota, capped
// at the whole window as Kafka caps it.
func (m *quotaManager) record(q metadata.ClientQuotas, kind quotaKind, principal, clientID string, v float64, now time.Time) time.Duration {
	quota, key, ok := resolveQuota(q, kind, principalName(principal), clientID)
	if !ok {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked(now)
	s := m.sensors[key]
	if s == nil {
		s = newRateSensor(m.samples, now)
		m.sensors[key] = s
	}
	s.record(v, now, m.window)
	total, elapsed := s.measure(now, m.window)
	// rate > quota  <=>  total/elapsed > quota; the wait that brings the rate back to
	// the quota is total/quota - elapsed.
	over := time.Duration(total/quota*float64(time.Second)) - elapsed
	if over <= 0 {
		return 0
	}
	return min(over, time.Duration(m.samples)*m.window)
}

// sweepLocked drops the sensors of clients idle for an hour, as Kafka expires them.
func (m *quotaManager) sweepLocked(now time.Time) {
	if now.Sub(m.lastSweep) < time.Minute {
		return
	}
	m.lastSweep = now
	for k, s := range m.sensors {
		if now.Sub(s.lastUsed) > time.Hour {
			delete(m.sensors, k)
		}
	}
}

// nanosToPercentage converts handler time to request_percentage units: percent of one
// thread's time per second, as Kafka measures it.
const nanosToPercentage = 100.0 / float64(time.Second)

// chargeQuotas charges a handled request to its client's quotas and returns the
// throttle time, which it also writes into the response. It runs on the writer, once
// the final result (and so a fetch's size) is known; handlerTime is the time the
// request spent in its handler.
func (c *conn) chargeQuotas(req *Request, res *Result, handlerTime time.Duration) time.Duration {
	quotas := c.s.image().ClientQuotas
	if len(quotas) == 0 || req.Key == kmsg.ApiVersions.Int16() {
		return 0
	}
	m, now := c.s.quotas, time.Now()
	var throttle time.Duration
	switch kr := req.Kreq.(type) {
	case *kmsg.ProduceRequest:
		throttle = m.record(quotas, quotaProduce, req.Principal, req.ClientID, float64(req.size), now)
	case *kmsg.FetchRequest:
		if fetchReader(kr, req).IsFollower() {
			return 0 // replication is not a client's fetch
		}
		var n int
		for _, b := range res.Encoded {
			n += len(b)
		}
		if res.Resp != nil {
			n = len(res.Resp.AppendTo(nil))
		}
		throttle = m.record(quotas, quotaFetch, req.Principal, req.ClientID, float64(n), now)
	case *kmsg.OffsetForLeaderEpochRequest:
		if kr.ReplicaID >= 0 {
			return 0 // a follower truncating, part of replication
		}
	}
	throttle = max(throttle, m.record(quotas, quotaRequest, req.Principal, req.ClientID, float64(handlerTime)*nanosToPercentage, now))
	if throttle <= 0 {
		return 0
	}
	ms := int32(min(throttle.Milliseconds()+1, int64(^uint32(0)>>1)))
	switch {
	case res.Resp != nil:
		if tr, ok := res.Resp.(kmsg.SetThrottleResponse); ok {
			tr.SetThrottle(ms)
		}
	case len(res.Encoded) > 0 && len(res.Encoded[0]) >= 4 && req.Key == kmsg.Fetch.Int16():
		// An encoded fetch response (v1+) starts with throttle_time_ms.
		binary.BigEndian.PutUint32(res.Encoded[0], uint32(ms))
	}
	return time.Duration(ms) * time.Millisecond
}
