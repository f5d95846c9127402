package telemetry

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/metadata"
)

// DefaultMaxBytes is Kafka's telemetry.max.bytes default: the largest push payload.
const DefaultMaxBytes = 1 << 20

// DefaultMaxSeries is Shale's telemetry.max.series default: the most client telemetry
// series a broker exports at once.
const DefaultMaxSeries = 10000

// expiryIntervals is how many push intervals a client instance may go without a request
// before it is forgotten and its series stop being exported: a client that pushes on
// time is never more than one interval (and a jitter) late.
const expiryIntervals = 3

// maxInstances bounds the client instances remembered, as Kafka's client instance cache
// does (16384 entries): past it the one heard from least recently is forgotten.
const maxInstances = 16384

// acceptedCompression is what GetTelemetrySubscriptions offers, in Kafka's order of
// preference (ClientMetricsManager's SUPPORTED_COMPRESSION_TYPES); none is always
// accepted.
var acceptedCompression = []int8{4 /* zstd */, 3 /* lz4 */, 1 /* gzip */, 2 /* snappy */}

// Config configures a Manager.
type Config struct {
	// MaxBytes is telemetry.max.bytes (default DefaultMaxBytes).
	MaxBytes int32
	// MaxSeries is telemetry.max.series (default DefaultMaxSeries; negative: no series
	// are exported).
	MaxSeries int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewInstanceID makes a client instance id (default a random UUID that is not zero
	// and whose Kafka string form does not start with '-', as Kafka's Uuid.randomUuid).
	NewInstanceID func() [16]byte
	Logger        *slog.Logger
}

// Client is what the broker knows of the client behind a request: KIP-714's match
// selectors other than the instance id.
type Client struct {
	ClientID        string
	SoftwareName    string
	SoftwareVersion string
	SourceAddress   string
	SourcePort      string
}

// Subscription is a GetTelemetrySubscriptions answer.
type Subscription struct {
	InstanceID       [16]byte
	ID               int32
	Compression      []int8
	IntervalMs       int32
	MaxBytes         int32
	DeltaTemporality bool
	// Metrics are the requested prefixes: none asks for nothing, "" alone for all.
	Metrics []string
}

type instance struct {
	id     [16]byte
	client Client
	// The subscription as last computed for this instance.
	subID      int32
	intervalMs int32
	metrics    []string
	// lastGet and lastPush are when a Get and a push were last accepted.
	lastGet, lastPush time.Time
	// lastErr is the error the instance's last request got: a Get right after an
	// UNKNOWN_SUBSCRIPTION_ID or UNSUPPORTED_COMPRESSION_TYPE is not throttled.
	lastErr     error
	terminating bool
	lastSeen    time.Time
}

// Manager is one broker's client telemetry state. It is safe for concurrent use.
type Manager struct {
	cfg Config
	lg  *slog.Logger

	mu        sync.Mutex
	instances map[[16]byte]*instance
	// parsed caches parsed subscriptions by name and configs (regexes compile once).
	parsed map[string]*metadata.ClientMetricsSubscription
	series *seriesSet
	// lastSweep is when expireLocked last looked at every instance.
	lastSweep time.Time

	seriesGauge prometheus.Gauge
	dropped     prometheus.Counter
	instGauge   prometheus.Gauge
	pushes      *prometheus.CounterVec
}

// New builds a Manager and registers its collector and its own series with reg (nil:
// not registered).
func New(cfg Config, reg prometheus.Registerer) *Manager {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.MaxSeries == 0 {
		cfg.MaxSeries = DefaultMaxSeries
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewInstanceID == nil {
		cfg.NewInstanceID = randomInstanceID
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Manager{cfg: cfg, lg: cfg.Logger, instances: map[[16]byte]*instance{}, parsed: map[string]*metadata.ClientMetricsSubscription{},
		series: newSeriesSet(),
		seriesGauge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shale", Name: "client_telemetry_series",
			Help: "Client telemetry series exported now (at most telemetry.max.series)."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "client_telemetry_series_dropped_total",
			Help: "Pushed client metric data points dropped because telemetry.max.series series were exported already, or whose name was exported with another type."}),
		instGauge: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shale", Name: "client_telemetry_instances",
			Help: "Client instances known to this broker's client telemetry."}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Name: "client_telemetry_pushes_total",
			Help: "PushTelemetry requests, by error (none when accepted)."}, []string{"error"}),
	}
	if reg != nil {
		reg.MustRegister(collector{m}, m.seriesGauge, m.dropped, m.instGauge, m.pushes)
	}
	return m
}

// MaxBytes is telemetry.max.bytes.
func (m *Manager) MaxBytes() int32 { return m.cfg.MaxBytes }

func randomInstanceID() [16]byte {
	for {
		var id [16]byte
		_, _ = rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40 // version 4
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		if id != ([16]byte{}) && !strings.HasPrefix(InstanceIDString(id), "-") {
			return id
		}
	}
}

// InstanceIDString is Kafka's string form of a client instance id (Uuid.toString: URL
// base64 without padding), the form match's client_instance_id and the exported label
// use.
func InstanceIDString(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// subscriptionsLocked parses the image's subscriptions (cached) and returns them in name
// order.
func (m *Manager) subscriptionsLocked(subs metadata.ClientMetrics) []*metadata.ClientMetricsSubscription {
	out := make([]*metadata.ClientMetricsSubscription, 0, len(subs))
	for _, name := range slices.Sorted(maps.Keys(subs)) {
		cfg := subs[name]
		var b strings.Builder
		b.WriteString(name)
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			b.WriteString("\x00" + k + "=" + cfg[k])
		}
		key := b.String()
		p, ok := m.parsed[key]
		if !ok {
			var err error
			if p, err = metadata.ParseClientMetrics(name, cfg); err != nil {
				// The controller validated it; a subscription stored by a newer version
				// with a key this one does not know is skipped, not fatal.
				m.lg.Warn("client metrics subscription skipped", "name", name, "err", err)
				p = nil
			}
			if len(m.parsed) > 4096 {
				clear(m.parsed) // old configs pile up only under constant churn
			}
			m.parsed[key] = p
		}
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// resolveLocked recomputes the instance's subscription from subs: the union of the
// matching subscriptions' metrics and the lowest of their intervals (Kafka's default
// when none matches).
func (m *Manager) resolveLocked(inst *instance, subs metadata.ClientMetrics) {
	attrs := map[string]string{
		metadata.MatchClientInstanceID:      InstanceIDString(inst.id),
		metadata.MatchClientID:              inst.client.ClientID,
		metadata.MatchClientSoftwareName:    inst.client.SoftwareName,
		metadata.MatchClientSoftwareVersion: inst.client.SoftwareVersion,
		metadata.MatchClientSourceAddress:   inst.client.SourceAddress,
		metadata.MatchClientSourcePort:      inst.client.SourcePort,
	}
	var interval int32
	set := map[string]bool{}
	for _, s := range m.subscriptionsLocked(subs) {
		if !s.Matches(attrs) {
			continue
		}
		if interval == 0 || s.IntervalMs < interval {
			interval = s.IntervalMs
		}
		for _, p := range s.Metrics {
			set[p] = true
		}
	}
	if interval == 0 {
		interval = metadata.ClientMetricsDefaultInterval
	}
	metrics := slices.Sorted(maps.Keys(set))
	if set[""] {
		metrics = []string{""}
	}
	// Like Kafka's computeSubscriptionId: a CRC32C of the metrics and the interval,
	// mixed with the instance id, so that any change of either is a new id.
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	fmt.Fprintf(h, "%q%d", metrics, interval)
	h.Write(inst.id[:])
	inst.subID = int32(h.Sum32())
	inst.intervalMs = interval
	inst.metrics = metrics
}

func (m *Manager) instanceLocked(id [16]byte, c Client, subs metadata.ClientMetrics, now time.Time) *instance {
	inst := m.instances[id]
	if inst == nil {
		if len(m.instances) >= maxInstances {
			m.evictOldestLocked()
		}
		inst = &instance{id: id, client: c}
		m.instances[id] = inst
		m.instGauge.Set(float64(len(m.instances)))
	}
	inst.lastSeen = now
	m.resolveLocked(inst, subs)
	return inst
}

// GetSubscription answers GetTelemetrySubscriptions for a client (id zero: a new
// instance). Errors wrap THROTTLING_QUOTA_EXCEEDED when the instance asks again sooner
// than its push interval allows.
func (m *Manager) GetSubscription(subs metadata.ClientMetrics, id [16]byte, c Client) (Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Now()
	m.expireLocked(now)
	if id == ([16]byte{}) {
		for id = m.cfg.NewInstanceID(); m.instances[id] != nil || id == ([16]byte{}); id = m.cfg.NewInstanceID() {
		}
	}
	inst := m.instanceLocked(id, c, subs, now)
	last := inst.lastGet
	if inst.lastPush.After(last) {
		last = inst.lastPush
	}
	interval := time.Duration(inst.intervalMs) * time.Millisecond
	if !last.IsZero() && now.Sub(last) < interval &&
		!errors.Is(inst.lastErr, kerr.UnknownSubscriptionID) && !errors.Is(inst.lastErr, kerr.UnsupportedCompressionType) {
		err := fmt.Errorf("%w: client instance %s asked for its subscription %v after its last request, sooner than its push interval %v",
			kerr.ThrottlingQuotaExceeded, InstanceIDString(id), now.Sub(last), interval)
		inst.lastErr = err
		return Subscription{}, err
	}
	inst.lastGet, inst.lastErr = now, nil
	return Subscription{
		InstanceID: id, ID: inst.subID, Compression: slices.Clone(acceptedCompression), IntervalMs: inst.intervalMs,
		MaxBytes: m.cfg.MaxBytes, DeltaTemporality: true, Metrics: slices.Clone(inst.metrics),
	}, nil
}

// Push handles PushTelemetry: Kafka's checks in Kafka's order (terminated instance,
// subscription id, push interval, compression, size), then the payload's metrics are
// exported. A terminating push removes the instance's series.
func (m *Manager) Push(subs metadata.ClientMetrics, id [16]byte, c Client, subID int32, terminating bool, compression int8, payload []byte) error {
	err := m.push(subs, id, c, subID, terminating, compression, payload)
	label := "none"
	var ke *kerr.Error
	if errors.As(err, &ke) {
		label = ke.Message
	} else if err != nil {
		label = "other"
	}
	m.pushes.WithLabelValues(label).Inc()
	return err
}

func (m *Manager) push(subs metadata.ClientMetrics, id [16]byte, c Client, subID int32, terminating bool, compression int8, payload []byte) error {
	if id == ([16]byte{}) {
		return fmt.Errorf("%w: invalid client instance id (zero)", kerr.InvalidRequest)
	}
	m.mu.Lock()
	now := m.cfg.Now()
	m.expireLocked(now)
	inst := m.instanceLocked(id, c, subs, now)
	err := m.validatePushLocked(inst, subID, terminating, compression, payload, now)
	inst.lastErr = err
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if terminating {
		inst.terminating = true
	}
	m.mu.Unlock()

	// Decoding happens outside the lock: a large payload must not stall other clients.
	var points []point
	if len(payload) > 0 {
		raw, err := records.Default().Decompress(int(compression), payload, nil)
		if err != nil {
			err = fmt.Errorf("%w: telemetry payload: %v", kerr.InvalidRecord, err)
			m.setErr(id, err)
			return err
		}
		if points, err = decodeOTLP(raw); err != nil {
			err = fmt.Errorf("%w: telemetry payload is not OTLP metrics: %v", kerr.InvalidRecord, err)
			m.setErr(id, err)
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.instances[id] != inst:
		// Expired or evicted while the payload was decoded: its series would have no
		// owner left to expire them.
	case terminating:
		m.series.removeInstance(id)
	case len(points) > 0:
		base := baseLabels(id, inst.client)
		m.dropped.Add(float64(m.series.add(id, base, points, m.cfg.MaxSeries)))
	}
	m.seriesGauge.Set(float64(m.series.len()))
	return nil
}

func (m *Manager) setErr(id [16]byte, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if inst := m.instances[id]; inst != nil {
		inst.lastErr = err
	}
}

func (m *Manager) validatePushLocked(inst *instance, subID int32, terminating bool, compression int8, payload []byte, now time.Time) error {
	name := InstanceIDString(inst.id)
	if inst.terminating {
		return fmt.Errorf("%w: client instance %s has already sent a terminating push", kerr.InvalidRequest, name)
	}
	if subID != inst.subID {
		return fmt.Errorf("%w: client instance %s pushed under subscription %d, its subscription is now %d", kerr.UnknownSubscriptionID, name, subID, inst.subID)
	}
	// The first push after a Get is always accepted; later ones an interval apart.
	accept := inst.lastGet.After(inst.lastPush) || !now.Before(inst.lastPush.Add(time.Duration(inst.intervalMs)*time.Millisecond))
	if accept {
		inst.lastPush = now
	} else if !terminating {
		return fmt.Errorf("%w: client instance %s pushed %v after its last push, sooner than its push interval %dms",
			kerr.ThrottlingQuotaExceeded, name, now.Sub(inst.lastPush), inst.intervalMs)
	}
	if compression != 0 && !slices.Contains(acceptedCompression, compression) {
		return fmt.Errorf("%w: compression type %d", kerr.UnsupportedCompressionType, compression)
	}
	if len(payload) > int(m.cfg.MaxBytes) {
		return fmt.Errorf("%w: %d bytes, telemetry.max.bytes is %d", kerr.TelemetryTooLarge, len(payload), m.cfg.MaxBytes)
	}
	return nil
}

// sweepEvery spaces expiry sweeps, which visit every instance, so that a broker with
// many clients does not scan them all on every request.
const sweepEvery = time.Second

// expireLocked forgets instances (and their series) not heard from for expiryIntervals
// of their push interval; it sweeps at most once per sweepEvery.
func (m *Manager) expireLocked(now time.Time) {
	if now.Sub(m.lastSweep) < sweepEvery {
		return
	}
	m.lastSweep = now
	for id, inst := range m.instances {
		if now.Sub(inst.lastSeen) > expiryIntervals*time.Duration(inst.intervalMs)*time.Millisecond {
			delete(m.instances, id)
			m.series.removeInstance(id)
		}
	}
	m.instGauge.Set(float64(len(m.instances)))
	m.seriesGauge.Set(float64(m.series.len()))
}

func (m *Manager) evictOldestLocked() {
	var oldest *instance
	for _, inst := range m.instances {
		if oldest == nil || inst.lastSeen.Before(oldest.lastSeen) {
			oldest = inst
		}
	}
	if oldest != nil {
		delete(m.instances, oldest.id)
		m.series.removeInstance(oldest.id)
	}
}

// baseLabels are the labels every series of an instance has.
func baseLabels(id [16]byte, c Client) []label {
	return []label{
		{"client_id", c.ClientID},
		{"client_instance_id", InstanceIDString(id)},
		{"client_software_name", c.SoftwareName},
		{"client_software_version", c.SoftwareVersion},
	}
}

type label struct{ name, value string }

func sortLabels(ls []label) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].name < ls[j].name })
}
