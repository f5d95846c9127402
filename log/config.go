package log

import (
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Config holds a log's topic-level settings, named after Kafka's topic configs, with
// Kafka's defaults. Start from DefaultConfig. A zero numeric field takes its default;
// where Kafka gives zero a meaning (retention.bytes, retention.ms, index.interval.bytes,
// flush.ms) pass 1 instead, which behaves the same in practice.
type Config struct {
	// SegmentBytes (segment.bytes, default 1 GiB, 14 to 2^31-1): the active segment rolls
	// when the next batch would take it past this size. A single batch larger than this
	// gets a segment of its own.
	SegmentBytes int64
	// SegmentMs (segment.ms, default 7 days): the active segment rolls once its first
	// batch's timestamp (or its creation, without timestamps) is this old.
	SegmentMs int64
	// RetentionBytes (retention.bytes, default -1 = no limit): old segments are deleted
	// while the log stays at least this large without them.
	RetentionBytes int64
	// RetentionMs (retention.ms, default 7 days, -1 = no limit): old segments whose
	// largest timestamp is older than this are deleted.
	RetentionMs int64
	// MaxMessageBytes (max.message.bytes, default 1048588): the largest batch Append takes.
	MaxMessageBytes int32
	// IndexIntervalBytes (index.interval.bytes, default 4096): log bytes between offset
	// index entries, which bounds the scan a read does after its index lookup.
	IndexIntervalBytes int32
	// SegmentIndexBytes (segment.index.bytes, default 10 MiB): size of each segment's
	// offset and time index; a full index rolls the segment.
	SegmentIndexBytes int32
	// FlushMessages (flush.messages, default math.MaxInt64 = leave it to the OS): fsync
	// once this many records are unflushed; 1 fsyncs every append.
	FlushMessages int64
	// FlushMs (flush.ms, default math.MaxInt64): fsync on append when the last fsync is
	// at least this many milliseconds old.
	FlushMs int64
	// WritebackBytes (Shale's writeback.bytes, log.writeback.bytes for the broker;
	// default DefaultWritebackBytes, negative = off): each time the active segment has
	// grown by this much since the last time, the appender starts the kernel's writeback
	// of what it wrote since (sync_file_range SYNC_FILE_RANGE_WRITE, which does not wait
	// for it), as RocksDB's bytes_per_sync does. Dirty pages then stay near this many
	// per partition instead of piling up until the kernel throttles the writer
	// (balance_dirty_pages), and a later fsync has little left to write. Durability does
	// not change: nothing waits for the writes.
	WritebackBytes int64
	// Maps bounds the sealed segments mapped at once, shared by every log of a broker
	// (log.mapped.segments.max); nil means a package-wide cache of
	// DefaultMaxMappedSegments. Set it before Open: SetConfig keeps the one a log has.
	Maps *MapCache
	// Logger receives recovery and background-flush reports; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock for rolls, retention and flush.ms; nil means time.Now.
	Now func() time.Time
	// Faults, when set, injects disk failures into the log (tests and simulations only;
	// see Faults). Read by Open; SetConfig keeps the log's own.
	Faults *Faults
	// Background runs the log's deferred work (see Background); nil gives the log a
	// goroutine of its own, stopped by Close. Read by Open; SetConfig keeps the log's own.
	Background Background
}

// Defaults of Config, as in Kafka.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * 60 * 60 * 1000
	DefaultRetentionBytes     = -1
	DefaultRetentionMs        = 7 * 24 * 60 * 60 * 1000
	DefaultMaxMessageBytes    = 1048588
	DefaultIndexIntervalBytes = 4096
	DefaultSegmentIndexBytes  = 10 << 20
	DefaultFlushMessages      = math.MaxInt64
	DefaultFlushMs            = math.MaxInt64
	// DefaultWritebackBytes is Shale's: 4 MiB keeps a partition's dirty pages to a few MiB
	// (a thousand busy partitions to a few GiB, under the kernel's usual dirty limits)
	// with one system call per 4 MiB appended, and matches the 4 MiB fallocate step of
	// the active segment (reserveChunk). RocksDB's bytes_per_sync is usually set to 1 MiB;
	// larger steps give the disk larger writes.
	DefaultWritebackBytes = 4 << 20

	// minSegmentBytes is Kafka's lower bound for segment.bytes.
	minSegmentBytes = 14
	// minSegmentIndexBytes is Kafka's lower bound for segment.index.bytes.
	minSegmentIndexBytes = 4
)

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       DefaultSegmentBytes,
		SegmentMs:          DefaultSegmentMs,
		RetentionBytes:     DefaultRetentionBytes,
		RetentionMs:        DefaultRetentionMs,
		MaxMessageBytes:    DefaultMaxMessageBytes,
		IndexIntervalBytes: DefaultIndexIntervalBytes,
		SegmentIndexBytes:  DefaultSegmentIndexBytes,
		FlushMessages:      DefaultFlushMessages,
		FlushMs:            DefaultFlushMs,
		WritebackBytes:     DefaultWritebackBytes,
	}
}

// withDefaults fills zero fields with their defaults.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.SegmentBytes == 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs == 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = d.RetentionBytes
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = d.RetentionMs
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.IndexIntervalBytes == 0 {
		c.IndexIntervalBytes = d.IndexIntervalBytes
	}
	if c.SegmentIndexBytes == 0 {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.FlushMessages == 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs == 0 {
		c.FlushMs = d.FlushMs
	}
	if c.WritebackBytes == 0 {
		c.WritebackBytes = d.WritebackBytes
	}
	if c.Maps == nil {
		c.Maps = defaultMaps
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate reports the first setting outside the range Kafka accepts (after zero fields
// take their defaults). Open refuses an invalid Config; SetConfig ignores one.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.SegmentBytes < minSegmentBytes || c.SegmentBytes > math.MaxInt32:
		return fmt.Errorf("segment.bytes %d is outside [%d, %d]", c.SegmentBytes, minSegmentBytes, math.MaxInt32)
	case c.SegmentMs < 1:
		return fmt.Errorf("segment.ms %d is below 1", c.SegmentMs)
	case c.RetentionMs < -1:
		return fmt.Errorf("retention.ms %d is below -1", c.RetentionMs)
	case c.MaxMessageBytes < 0:
		return fmt.Errorf("max.message.bytes %d is negative", c.MaxMessageBytes)
	case c.IndexIntervalBytes < 0:
		return fmt.Errorf("index.interval.bytes %d is negative", c.IndexIntervalBytes)
	case c.SegmentIndexBytes < minSegmentIndexBytes:
		return fmt.Errorf("segment.index.bytes %d is below %d", c.SegmentIndexBytes, minSegmentIndexBytes)
	case c.FlushMessages < 1:
		return fmt.Errorf("flush.messages %d is below 1", c.FlushMessages)
	case c.FlushMs < 0:
		return fmt.Errorf("flush.ms %d is negative", c.FlushMs)
	}
	return nil
}
