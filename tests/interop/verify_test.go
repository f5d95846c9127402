package interop

import (
	"bytes"
	"fmt"
	"slices"
	"time"
)

// timestampSlack widens the produce window when checking timestamps a client stamped
// itself, for clock reads on either side of the window.
const timestampSlack = 2 * time.Second

// checkCell compares what a client got back with what it was asked to produce and
// returns every discrepancy found, in a stable order. An empty result is a pass.
func checkCell(spec *cellSpec, out *cellOutput) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// Records are identified by value where it is non-empty (values are unique), else by
	// key (the null-value and empty-value records have keys of their own).
	byValue := map[string]int{}
	byKey := map[string]int{}
	for _, r := range spec.Records {
		if len(r.Value) > 0 {
			byValue[string(r.Value)] = r.Index
		} else {
			byKey[string(r.Key)] = r.Index
		}
	}
	identify := func(c consumedRecord) (int, bool) {
		if len(c.Value) > 0 {
			i, ok := byValue[string(c.Value)]
			return i, ok
		}
		i, ok := byKey[string(c.Key)]
		return i, ok
	}

	seen := make([]int, len(spec.Records))
	indexAt := map[int32]map[int64]int{} // partition -> offset -> record index
	byPartition := map[int32][]consumedRecord{}
	for _, c := range out.Consumed {
		i, ok := identify(c)
		if !ok {
			add("consumed an unexpected record at %d/%d: key=%s value=%.60s", c.Partition, c.Offset, nullable(c.Key), nullable(c.Value))
			continue
		}
		seen[i]++
		if seen[i] > 1 {
			add("record #%d consumed %d times (again at %d/%d)", i, seen[i], c.Partition, c.Offset)
			continue
		}
		want := spec.Records[i]
		sameBytes := bytesEqualNullable
		if spec.Caps.readsEmptyAsNull {
			sameBytes = func(got, want []byte) bool { return bytes.Equal(got, want) && (got != nil || len(want) == 0) }
		}
		if !sameBytes(c.Key, want.Key) {
			add("record #%d: key %s, want %s", i, nullable(c.Key), nullable(want.Key))
		}
		if !sameBytes(c.Value, want.Value) {
			add("record #%d: value %.60s, want %.60s", i, nullable(c.Value), nullable(want.Value))
		}
		if !headersEqual(c.Headers, want.Headers) {
			add("record #%d: headers %s, want %s", i, describeHeaders(c.Headers), describeHeaders(want.Headers))
		}
		checkTimestamp(out, want, c, add)
		if want.Key != nil && (len(want.Key) > 0 || spec.Caps.emptyKeyHashed) {
			if p := spec.Caps.partitioner(want.Key, partitionCount); int32(p) != c.Partition {
				add("record #%d key %s: in partition %d, %s puts it in %d", i, nullable(want.Key), c.Partition, spec.Caps.partitionerName, p)
			}
		}
		if indexAt[c.Partition] == nil {
			indexAt[c.Partition] = map[int64]int{}
		}
		indexAt[c.Partition][c.Offset] = i
		byPartition[c.Partition] = append(byPartition[c.Partition], c)
	}
	var missing []int
	for i, n := range seen {
		if n == 0 {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		add("%d of %d records never consumed: %s", len(missing), len(spec.Records), summarizeIndexes(missing))
	}

	for p, recs := range byPartition {
		if p < 0 || p >= partitionCount {
			add("consumed from partition %d of a %d-partition topic", p, partitionCount)
		}
		slices.SortFunc(recs, func(a, b consumedRecord) int { return int(a.Offset - b.Offset) })
		prevIndex := -1
		for k, c := range recs {
			if c.Offset != int64(k) {
				add("partition %d: offsets not contiguous from 0: position %d has offset %d", p, k, c.Offset)
				break
			}
			i := indexAt[p][c.Offset]
			if i < prevIndex {
				add("partition %d: record #%d at offset %d follows record #%d (produce order lost)", p, i, c.Offset, prevIndex)
				break
			}
			prevIndex = i
		}
	}

	if len(out.Produced) > 0 {
		acked := make([]int, len(spec.Records))
		for _, pr := range out.Produced {
			if pr.Index < 0 || pr.Index >= len(acked) {
				add("acknowledgement for unknown record #%d", pr.Index)
				continue
			}
			acked[pr.Index]++
			if got, ok := indexAt[pr.Partition][pr.Offset]; !ok || got != pr.Index {
				where := "nothing"
				if ok {
					where = fmt.Sprintf("record #%d", got)
				}
				add("record #%d acknowledged at %d/%d, but %s was consumed there", pr.Index, pr.Partition, pr.Offset, where)
			}
		}
		var unacked []int
		for i, n := range acked {
			if n != 1 {
				unacked = append(unacked, i)
			}
		}
		if len(unacked) > 0 {
			add("%d records not acknowledged exactly once: %s", len(unacked), summarizeIndexes(unacked))
		}
	}
	return problems
}

func checkTimestamp(out *cellOutput, want specRecord, got consumedRecord, add func(string, ...any)) {
	if got.TimestampType != "" && got.TimestampType != "create" {
		add("record #%d: timestamp type %q, want create", want.Index, got.TimestampType)
	}
	if !want.Timestamp.IsZero() {
		if !got.Timestamp.Equal(want.Timestamp) {
			add("record #%d: timestamp %d, want %d", want.Index, got.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
		}
		return
	}
	lo, hi := out.ProduceStart.Add(-timestampSlack), out.ProduceEnd.Add(timestampSlack)
	if got.Timestamp.Before(lo) || got.Timestamp.After(hi) {
		add("record #%d: timestamp %d outside the produce window [%d, %d]", want.Index, got.Timestamp.UnixMilli(), lo.UnixMilli(), hi.UnixMilli())
	}
}

// summarizeIndexes prints up to a dozen indexes and how many more there are.
func summarizeIndexes(idx []int) string {
	const show = 12
	if len(idx) <= show {
		return fmt.Sprint(idx)
	}
	return fmt.Sprintf("%v and %d more", idx[:show], len(idx)-show)
}
