package interop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// codecAttr is the compression codec in a record batch's attributes, per codec name.
var codecAttr = map[string]uint8{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// referenceRead reads a cell's topic back with franz-go, every partition from its start
// to its end offset, independently of the client under test: it shows what the broker
// stored and serves, byte for byte (null and empty apart).
func referenceRead(ctx context.Context, spec *cellSpec) ([]consumedRecord, error) {
	// Read up to the end offsets, not up to a record count, so that duplicates beyond
	// the expected count show up too.
	ends, err := target.admin.ListEndOffsets(ctx, spec.Topic)
	if err != nil {
		return nil, fmt.Errorf("reference read: listing end offsets: %w", err)
	}
	remaining := 0
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		want[o.Partition] = o.Offset
		remaining += int(o.Offset)
		parts[o.Partition] = kgo.NewOffset().AtStart()
		if o.Err != nil {
			err = errors.Join(err, fmt.Errorf("reference read: end offset of %d: %w", o.Partition, o.Err))
		}
	})
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(target.seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{spec.Topic: parts}),
		kgo.FetchMaxWait(250*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var recs []consumedRecord
	for remaining > 0 {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reference read got %d records, %d short of the end offsets %v, before %w", len(recs), remaining, want, ctx.Err())
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			fetchErr = errors.Join(fetchErr, fmt.Errorf("reference fetch %s/%d: %w", topic, p, err))
		})
		if fetchErr != nil {
			return nil, fetchErr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Offset >= want[r.Partition] {
				return
			}
			remaining--
			c := consumedRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp}
			switch r.Attrs.TimestampType() {
			case 0:
				c.TimestampType = "create"
			case 1:
				c.TimestampType = "append"
			}
			for _, h := range r.Headers {
				c.Headers = append(c.Headers, header{Key: h.Key, Value: h.Value})
			}
			recs = append(recs, c)
		})
	}
	return recs, nil
}

// checkStored holds what the broker stored to the same checks as the client's own read,
// and checks the batches it stored them in.
func checkStored(ctx context.Context, spec *cellSpec, out *cellOutput) []string {
	recs, err := referenceRead(ctx, spec)
	if err != nil {
		return []string{err.Error()}
	}
	strict := *spec
	strict.Caps.readsEmptyAsNull = false
	var problems []string
	for _, p := range checkCell(&strict, &cellOutput{
		Produced:     out.Produced,
		Consumed:     recs,
		ProduceStart: out.ProduceStart,
		ProduceEnd:   out.ProduceEnd,
	}) {
		problems = append(problems, "franz-go reference read: "+p)
	}
	problems = append(problems, checkBatchCodecs(ctx, spec)...)
	return problems
}

// librdkafkaCompressionGate explains, from the versions the broker advertises, why
// librdkafka 2.0.2 sends a codec uncompressed (logging "Broker does not support
// compression type"). It gates codecs on features it derives from ApiVersions by exact
// versions: gzip, snappy and lz4 need Produce v0 in range (confluentinc/librdkafka#4956,
// fixed after 2.0.2), lz4 also its "LZ4" feature, which is FindCoordinator v0 in range,
// and zstd needs Produce v7 and Fetch v10 in range. It returns "" when the advertised
// ranges should let librdkafka compress.
func librdkafkaCompressionGate(ctx context.Context, codec string) string {
	versions, err := target.admin.ApiVersions(ctx)
	if err != nil {
		return fmt.Sprintf("(could not read the broker's ApiVersions: %v)", err)
	}
	inRange := func(v kadm.BrokerApiVersions, key, version int16) bool {
		lo, hi, ok := v.KeyVersions(key)
		return ok && lo <= version && version <= hi
	}
	describe := func(v kadm.BrokerApiVersions, key int16, name string) string {
		lo, hi, ok := v.KeyVersions(key)
		if !ok {
			return name + " not advertised"
		}
		return fmt.Sprintf("%s v%d-%d", name, lo, hi)
	}
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			continue
		}
		const produce, fetch, findCoordinator = 0, 1, 10
		switch {
		case codec == "zstd" && !(inRange(v, produce, 7) && inRange(v, fetch, 10)):
			return fmt.Sprintf("broker's ApiVersions: %s, %s; librdkafka 2.0.2 compresses zstd only with Produce v7 and Fetch v10 in range",
				describe(v, produce, "Produce"), describe(v, fetch, "Fetch"))
		case codec != "zstd" && codec != "none" && !inRange(v, produce, 0):
			return fmt.Sprintf("broker's ApiVersions: %s; librdkafka 2.0.2 compresses %s only when Produce v0 is advertised (confluentinc/librdkafka#4956)",
				describe(v, produce, "Produce"), codec)
		case codec == "lz4" && !inRange(v, findCoordinator, 0):
			return fmt.Sprintf("broker's ApiVersions: %s; librdkafka 2.0.2 enables lz4 only when FindCoordinator v0 is advertised",
				describe(v, findCoordinator, "FindCoordinator"))
		}
	}
	return ""
}
