package bench

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Mode is what a workload measures.
type Mode string

// The workload modes.
const (
	// ModeProduce measures producers alone.
	ModeProduce Mode = "produce"
	// ModeConsume preloads the topic, then measures consumers reading it.
	ModeConsume Mode = "consume"
	// ModeE2E runs producers and consumers together and measures the
	// latency from a record's intended send time to its receipt.
	ModeE2E Mode = "e2e"
)

func parseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeProduce, ModeConsume, ModeE2E:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q (want produce, consume or e2e)", s)
}

// KeyKind is how record keys are chosen.
type KeyKind string

// The key distributions.
const (
	// KeysNone sends records without keys; franz-go's default partitioner
	// then fills one partition's batch at a time.
	KeysNone KeyKind = "none"
	// KeysRandom gives every record a fresh random key, spreading records
	// uniformly over the partitions by key hash.
	KeysRandom KeyKind = "random"
	// KeysFixed draws every record's key uniformly from a fixed set.
	KeysFixed KeyKind = "fixed"
)

// keySize is the length of every generated key. Fixed-length keys keep the
// byte accounting identical across key distributions.
const keySize = 16

// KeyDist is a key distribution: none, random, or fixed:N.
type KeyDist struct {
	Kind  KeyKind
	Count int // the size of the set, for KeysFixed
}

// ParseKeyDist parses "none", "random" or "fixed:N".
func ParseKeyDist(s string) (KeyDist, error) {
	switch {
	case s == "" || s == string(KeysNone):
		return KeyDist{Kind: KeysNone}, nil
	case s == string(KeysRandom):
		return KeyDist{Kind: KeysRandom}, nil
	case strings.HasPrefix(s, string(KeysFixed)+":"):
		n, err := strconv.Atoi(strings.TrimPrefix(s, string(KeysFixed)+":"))
		if err != nil || n < 1 {
			return KeyDist{}, fmt.Errorf("bad key distribution %q: fixed:N needs a positive integer N", s)
		}
		return KeyDist{Kind: KeysFixed, Count: n}, nil
	}
	return KeyDist{}, fmt.Errorf("unknown key distribution %q (want none, random or fixed:N)", s)
}

func (k KeyDist) String() string {
	if k.Kind == KeysFixed {
		return fmt.Sprintf("fixed:%d", k.Count)
	}
	if k.Kind == "" {
		return string(KeysNone)
	}
	return string(k.Kind)
}

// MarshalText makes a KeyDist read as its flag form in JSON.
func (k KeyDist) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText parses the flag form.
func (k *KeyDist) UnmarshalText(b []byte) error {
	d, err := ParseKeyDist(string(b))
	if err != nil {
		return err
	}
	*k = d
	return nil
}

// Acks is the producer's required acknowledgements: -1 (all ISR), 0 or 1.
type Acks int16

// ParseAcks parses "all", "-1", "0" or "1".
func ParseAcks(s string) (Acks, error) {
	switch s {
	case "all", "-1":
		return -1, nil
	case "0":
		return 0, nil
	case "1":
		return 1, nil
	}
	return 0, fmt.Errorf("unknown acks %q (want all, -1, 0 or 1)", s)
}

func (a Acks) String() string {
	if a == -1 {
		return "all"
	}
	return strconv.Itoa(int(a))
}

// MarshalText writes acks in flag form.
func (a Acks) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText parses the flag form.
func (a *Acks) UnmarshalText(b []byte) error {
	v, err := ParseAcks(string(b))
	if err != nil {
		return err
	}
	*a = v
	return nil
}

// clientOpts returns the franz-go options for these acks. Idempotent
// production needs acks=all, so acks 0 and 1 turn it off.
func (a Acks) clientOpts() []kgo.Opt {
	switch a {
	case 0:
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
	case 1:
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	}
	return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())}
}

var compressionCodecs = map[string]func() kgo.CompressionCodec{
	"none":   kgo.NoCompression,
	"gzip":   kgo.GzipCompression,
	"snappy": kgo.SnappyCompression,
	"lz4":    kgo.Lz4Compression,
	"zstd":   kgo.ZstdCompression,
}

func validCompression(s string) error {
	if _, ok := compressionCodecs[s]; !ok {
		return fmt.Errorf("unknown compression %q (want none, gzip, snappy, lz4 or zstd)", s)
	}
	return nil
}

// Workload is one benchmark run's shape. The zero value is not valid; start
// from DefaultWorkload or a preset.
type Workload struct {
	// Name labels the run: a preset name, or "custom".
	Name string `json:"name"`
	// Description says in a line what the workload mirrors.
	Description string `json:"description,omitempty"`
	Mode        Mode   `json:"mode"`

	// Topic is created if missing with Partitions and ReplicationFactor
	// (-1: the broker's default).
	Topic             string `json:"topic"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
	// TopicConfigs are set on the topic when it is created (Kafka topic
	// config names, e.g. min.insync.replicas).
	TopicConfigs map[string]string `json:"topic_configs,omitempty"`

	// RecordSize is the value size in bytes; keys add keySize bytes when
	// Keys is not none.
	RecordSize  int     `json:"record_size"`
	Keys        KeyDist `json:"keys"`
	Acks        Acks    `json:"acks"`
	Compression string  `json:"compression"`
	// Linger is how long a partition's batch waits to fill (franz-go
	// default 10ms).
	Linger time.Duration `json:"linger_ns"`
	// BatchMaxBytes caps one partition's batch (franz-go default 1000012).
	BatchMaxBytes int32 `json:"batch_max_bytes"`
	// BufferBytes bounds the records each producer has in flight, like
	// Kafka's buffer.memory; at most 50000 records (franz-go's default).
	BufferBytes int64 `json:"buffer_bytes"`

	Producers int `json:"producers"`
	Consumers int `json:"consumers"`
	// Group, when set, makes the consumers one consumer group of that name
	// (the group's offsets are committed up front so it starts where the
	// measurement does); when empty they split the partitions directly.
	Group string `json:"group,omitempty"`

	// Warmup runs the producers before the measurement starts: records
	// completed before then count towards neither throughput nor latency,
	// so connection set-up and the first metadata round do not land in the
	// figures. Consume measurements (reading a preloaded topic) have none.
	Warmup time.Duration `json:"warmup_ns"`
	// Duration bounds the measurement; Records, when positive, is how many
	// records the measurement counts: produced (or consumed) after the
	// warm-up, whose records come on top. The first limit reached ends the
	// run. A consume run reads the whole preload, for at
	// most 2*Duration+5s.
	Duration time.Duration `json:"duration_ns"`
	Records  int64         `json:"records,omitempty"`

	// Rate, when positive, is the total records/s offered open loop.
	Rate float64 `json:"rate,omitempty"`
	// RateOfPeak, when positive and Rate is zero, sets Rate to this
	// fraction of a closed-loop peak measured first with the same shape.
	RateOfPeak float64 `json:"rate_of_peak,omitempty"`

	// Preload, for consume workloads, produces the records to be read
	// first (with the producer settings and limits above); without it the
	// consumers read what the topic already holds.
	Preload bool `json:"preload"`
}

// DefaultWorkload is what `shale bench produce` runs with no flags.
func DefaultWorkload(mode Mode) Workload {
	return Workload{
		Name:              "custom",
		Mode:              mode,
		Topic:             "shale-bench",
		Partitions:        6,
		ReplicationFactor: 1,
		RecordSize:        1024,
		Keys:              KeyDist{Kind: KeysNone},
		Acks:              -1,
		Compression:       "none",
		Linger:            10 * time.Millisecond,
		BatchMaxBytes:     1000012,
		BufferBytes:       32 << 20,
		Producers:         1,
		Consumers:         1,
		Warmup:            time.Second,
		Duration:          10 * time.Second,
		Preload:           true,
	}
}

// e2eHeaderSize is the run id and intended send time at the start of every
// e2e record value.
const e2eHeaderSize = 16

// maxBufferedRecords mirrors franz-go's default cap on buffered records.
const maxBufferedRecords = 50000

// Validate reports every problem with the workload at once.
func (w *Workload) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, err := parseMode(string(w.Mode)); err != nil {
		errs = append(errs, err)
	}
	if w.Topic == "" {
		bad("--topic must not be empty")
	}
	if w.Partitions < 1 {
		bad("--partitions must be at least 1, got %d", w.Partitions)
	}
	if w.ReplicationFactor < 1 && w.ReplicationFactor != -1 {
		bad("--replication-factor must be at least 1 (or -1 for the broker default), got %d", w.ReplicationFactor)
	}
	minSize := 1
	if w.Mode == ModeE2E {
		minSize = e2eHeaderSize
	}
	if w.RecordSize < minSize {
		bad("--record-size must be at least %d for %s, got %d", minSize, w.Mode, w.RecordSize)
	}
	if w.Keys.Kind == KeysFixed && w.Keys.Count < 1 {
		bad("--keys fixed:N needs N >= 1")
	}
	if w.Acks < -1 || w.Acks > 1 {
		bad("--acks must be all, -1, 0 or 1, got %d", w.Acks)
	}
	if w.Mode == ModeE2E && w.Acks == 0 && w.RateOfPeak > 0 {
		bad("--acks 0 cannot measure a peak to take a fraction of")
	}
	if err := validCompression(w.Compression); err != nil {
		errs = append(errs, err)
	}
	if w.Linger < 0 || w.Linger > time.Minute {
		bad("--linger must be between 0 and 1m, got %v", w.Linger)
	}
	// A batch must hold at least one record with its framing (61 bytes of
	// batch header, up to ~30 of record header).
	if need := int64(w.RecordSize) + keySize + 128; int64(w.BatchMaxBytes) < need || w.BatchMaxBytes > 1<<30 {
		bad("--batch-max-bytes must be between %d (one record with its framing) and 1GiB, got %d", need, w.BatchMaxBytes)
	}
	if w.BufferBytes < int64(w.RecordSize) {
		bad("--buffer-bytes must hold at least one record, got %d", w.BufferBytes)
	}
	if w.Mode != ModeConsume || w.Preload {
		if w.Producers < 1 {
			bad("--producers must be at least 1, got %d", w.Producers)
		}
	}
	if w.Mode != ModeProduce && w.Consumers < 1 {
		bad("--consumers must be at least 1, got %d", w.Consumers)
	}
	if w.Producers > 1024 || w.Consumers > 1024 {
		bad("--producers and --consumers are limited to 1024")
	}
	if w.Duration < 0 || w.Records < 0 || w.Warmup < 0 {
		bad("--duration, --warmup and --records must not be negative")
	}
	if w.Duration == 0 && w.Records == 0 {
		bad("one of --duration or --records must be positive")
	}
	if w.Rate < 0 || w.RateOfPeak < 0 || w.RateOfPeak > 1 {
		bad("--rate must not be negative (rate-of-peak must be in (0, 1]), got %v / %v", w.Rate, w.RateOfPeak)
	}
	return errors.Join(errs...)
}

// slots is how many records one producer keeps in flight: BufferBytes worth,
// at most franz-go's default of 50000.
func (w *Workload) slots() int {
	per := int64(w.RecordSize)
	if w.Keys.Kind != KeysNone {
		per += keySize
	}
	n := w.BufferBytes / per
	if n > maxBufferedRecords {
		n = maxBufferedRecords
	}
	if n < 1 {
		n = 1
	}
	return int(n)
}

// recordBytes is the payload bytes one record counts for in MB/s.
func (w *Workload) recordBytes() int64 {
	if w.Keys.Kind == KeysNone {
		return int64(w.RecordSize)
	}
	return int64(w.RecordSize) + keySize
}

// Summary is the workload's shape in one line, for table headings.
func (w *Workload) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %s records, %d partition%s, rf %d", w.Mode, formatBytes(int64(w.RecordSize)), w.Partitions, plural(int(w.Partitions)), w.ReplicationFactor)
	for _, k := range sortedKeys(w.TopicConfigs) {
		fmt.Fprintf(&b, ", %s=%s", k, w.TopicConfigs[k])
	}
	if w.Mode != ModeConsume || w.Preload {
		fmt.Fprintf(&b, ", %d producer%s, acks=%s", w.Producers, plural(w.Producers), w.Acks)
		if w.Compression != "none" {
			fmt.Fprintf(&b, ", %s", w.Compression)
		}
		fmt.Fprintf(&b, ", linger %v, batch %s", w.Linger, formatBytes(int64(w.BatchMaxBytes)))
	}
	if w.Mode != ModeProduce {
		fmt.Fprintf(&b, ", %d consumer%s", w.Consumers, plural(w.Consumers))
		if w.Group != "" {
			b.WriteString(" (group)")
		}
	}
	if w.Keys.Kind != KeysNone {
		fmt.Fprintf(&b, ", keys %s", w.Keys)
	}
	switch {
	case w.Rate > 0:
		fmt.Fprintf(&b, ", %s rec/s open loop", formatCount(w.Rate))
	case w.RateOfPeak > 0:
		fmt.Fprintf(&b, ", open loop at %.0f%% of peak", w.RateOfPeak*100)
	}
	return b.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
