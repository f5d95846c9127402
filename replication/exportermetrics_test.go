package replication

import (
	"strconv"
	"testing"
)

// BenchmarkTrafficProduced is what the per-topic counters add to each partition of a
// produce request.
func BenchmarkTrafficProduced(b *testing.B) {
	var t traffic
	pps := make([]*ProducePartition, 64)
	for i := range pps {
		pps[i] = &ProducePartition{Topic: "topic-" + strconv.Itoa(i%8), RecordCount: 10, Bytes: 1000}
	}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			t.produced(pps[i%len(pps)])
			i++
		}
	})
}
