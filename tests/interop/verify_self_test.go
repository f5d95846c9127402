package interop

import (
	"slices"
	"testing"
	"time"
)

// perfectOutput is what a flawless client and broker would report for spec: every record
// once, on its partitioner's partition (null keys spread round-robin), at consecutive
// offsets, acknowledged where it was stored.
func perfectOutput(spec *cellSpec) *cellOutput {
	out := &cellOutput{ProduceStart: time.Now(), ProduceEnd: time.Now()}
	next := make([]int64, partitionCount)
	for _, r := range spec.Records {
		p := r.Index % partitionCount
		if r.Key != nil && (len(r.Key) > 0 || spec.Caps.emptyKeyHashed) {
			p = spec.Caps.partitioner(r.Key, partitionCount)
		}
		ts := r.Timestamp
		if ts.IsZero() {
			ts = out.ProduceStart
		}
		out.Consumed = append(out.Consumed, consumedRecord{
			Partition: int32(p), Offset: next[p], Key: r.Key, Value: r.Value,
			Headers: slices.Clone(r.Headers), Timestamp: ts, TimestampType: "create",
		})
		out.Produced = append(out.Produced, producedRecord{Index: r.Index, Partition: int32(p), Offset: next[p]})
		next[p]++
	}
	return out
}

// TestCheckCellCatchesFaults makes sure the checks fail on each kind of fault they claim
// to detect, and pass a flawless result.
func TestCheckCellCatchesFaults(t *testing.T) {
	spec := newCellSpec("selftest", "none", franzCaps, time.Now())
	if problems := checkCell(spec, perfectOutput(spec)); len(problems) > 0 {
		t.Fatalf("a flawless output fails the checks: %v", problems)
	}
	// find returns the position in Consumed of record i.
	find := func(out *cellOutput, i int) int {
		for k, c := range out.Consumed {
			if j, ok := spec.indexOf(c.Key, c.Value); ok && j == i {
				return k
			}
		}
		t.Fatalf("record #%d not in the perfect output", i)
		return -1
	}
	faults := map[string]func(out *cellOutput){
		"record lost": func(out *cellOutput) {
			k := find(out, 100)
			out.Consumed = slices.Delete(out.Consumed, k, k+1)
		},
		"record duplicated": func(out *cellOutput) {
			out.Consumed = append(out.Consumed, out.Consumed[find(out, 5)])
		},
		"order within a partition swapped": func(out *cellOutput) {
			a, b := find(out, 0), find(out, distinctKeys) // same key, so same partition
			out.Consumed[a].Offset, out.Consumed[b].Offset = out.Consumed[b].Offset, out.Consumed[a].Offset
		},
		"offset gap": func(out *cellOutput) {
			for k := range out.Consumed {
				if out.Consumed[k].Partition == 1 && out.Consumed[k].Offset >= 10 {
					out.Consumed[k].Offset++
				}
			}
		},
		"key on the wrong partition": func(out *cellOutput) {
			k := find(out, 3)
			out.Consumed[k].Partition = (out.Consumed[k].Partition + 1) % partitionCount
		},
		"null key read as empty": func(out *cellOutput) {
			out.Consumed[find(out, nullKeyIndex)].Key = []byte{}
		},
		"empty key read as null": func(out *cellOutput) {
			out.Consumed[find(out, emptyKeyIndex)].Key = nil
		},
		"null value read as empty": func(out *cellOutput) {
			out.Consumed[find(out, nullValueIndex)].Value = []byte{}
		},
		"value corrupted": func(out *cellOutput) {
			k := find(out, 77)
			v := slices.Clone(out.Consumed[k].Value)
			v[len(v)-1] ^= 1
			out.Consumed[k].Value = v
		},
		"header lost": func(out *cellOutput) {
			k := find(out, 9)
			out.Consumed[k].Headers = out.Consumed[k].Headers[:1]
		},
		"headers reordered": func(out *cellOutput) {
			k := find(out, 9)
			h := out.Consumed[k].Headers
			out.Consumed[k].Headers = []header{h[1], h[0]}
		},
		"timestamp changed": func(out *cellOutput) {
			out.Consumed[find(out, 12)].Timestamp = spec.Records[12].Timestamp.Add(time.Millisecond)
		},
		"log-append time instead of create time": func(out *cellOutput) {
			out.Consumed[find(out, 12)].TimestampType = "append"
		},
		"acknowledged at another offset": func(out *cellOutput) {
			out.Produced[50].Offset++
		},
		"acknowledged twice": func(out *cellOutput) {
			out.Produced = append(out.Produced, out.Produced[60])
		},
	}
	for name, fault := range faults {
		out := perfectOutput(spec)
		fault(out)
		if problems := checkCell(spec, out); len(problems) == 0 {
			t.Errorf("%s: not detected", name)
		}
	}
}
