package interop

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// storedBatch is one record batch as the broker serves it.
type storedBatch struct {
	Partition   int32
	FirstOffset int64
	NumRecords  int32
	Bytes       int // the whole batch, header included
	Magic       int8
	Codec       uint8
}

// loneBatchMaxBytes bounds the batches a client may send uncompressed whatever the
// codec: franz-go and librdkafka fall back to no compression when compressing does not
// shrink a batch, which happens to a lone small record.
const loneBatchMaxBytes = 300

// storedBatches fetches every batch of topic with raw Fetch requests, to see batch
// headers (magic, codec, record counts) that consumer APIs hide.
func storedBatches(ctx context.Context, topic string) ([]storedBatch, error) {
	details, err := target.admin.ListTopics(ctx, topic)
	if err != nil {
		return nil, err
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return nil, fmt.Errorf("topic %s metadata: %v", topic, d.Err)
	}
	var out []storedBatch
	for _, pd := range d.Partitions.Sorted() {
		next := int64(0)
		for {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID = -1
			req.MaxWaitMillis = 0
			req.MinBytes = 1
			req.MaxBytes = 16 << 20
			req.SessionEpoch = -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, d.ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition = pd.Partition
			rp.FetchOffset = next
			rp.CurrentLeaderEpoch = -1
			rp.LogStartOffset = -1
			rp.PartitionMaxBytes = 16 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, target.client.Broker(int(pd.Leader)))
			if err != nil {
				return nil, fmt.Errorf("raw fetch %s/%d at %d: %w", topic, pd.Partition, next, err)
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return nil, fmt.Errorf("raw fetch %s/%d: %w", topic, pd.Partition, err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return nil, fmt.Errorf("raw fetch %s/%d: response has %d topics", topic, pd.Partition, len(resp.Topics))
			}
			rpart := resp.Topics[0].Partitions[0]
			if err := kerr.ErrorForCode(rpart.ErrorCode); err != nil {
				return nil, fmt.Errorf("raw fetch %s/%d at %d: %w", topic, pd.Partition, next, err)
			}
			if next >= rpart.HighWatermark {
				break
			}
			raw := rpart.RecordBatches
			got := 0
			for len(raw) >= 17 {
				size := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
				if size > len(raw) {
					break // a partial batch at the end of the response
				}
				sb := storedBatch{Partition: pd.Partition, Bytes: size, Magic: int8(raw[16])}
				if sb.Magic != 2 {
					sb.FirstOffset = int64(binary.BigEndian.Uint64(raw[:8]))
					out = append(out, sb)
					return out, nil // older formats: reported by the caller, not parsed here
				}
				var b kmsg.RecordBatch
				if err := b.ReadFrom(raw[:size]); err != nil {
					return nil, fmt.Errorf("raw fetch %s/%d: batch at %d: %w", topic, pd.Partition, next, err)
				}
				sb.FirstOffset, sb.NumRecords, sb.Codec = b.FirstOffset, b.NumRecords, uint8(b.Attributes&7)
				out = append(out, sb)
				next = b.FirstOffset + int64(b.LastOffsetDelta) + 1
				raw = raw[size:]
				got++
			}
			if got == 0 {
				return nil, fmt.Errorf("raw fetch %s/%d at %d below the high watermark %d returned no whole batch", topic, pd.Partition, next, rpart.HighWatermark)
			}
		}
	}
	return out, nil
}

// checkBatchCodecs checks that the cell's records are stored in v2 batches compressed
// with its codec, allowing only lone small batches to go uncompressed.
func checkBatchCodecs(ctx context.Context, spec *cellSpec) []string {
	batches, err := storedBatches(ctx, spec.Topic)
	if err != nil {
		return []string{err.Error()}
	}
	want := codecAttr[spec.Codec]
	var problems []string
	wrong := map[uint8]int{} // codec -> records in batches that should not have it
	for _, b := range batches {
		if b.Magic != 2 {
			problems = append(problems, fmt.Sprintf("partition %d offset %d: stored as message format v%d, not record batch v2", b.Partition, b.FirstOffset, b.Magic))
			continue
		}
		lone := b.NumRecords == 1 && b.Bytes <= loneBatchMaxBytes
		if b.Codec != want && !(b.Codec == 0 && lone) {
			wrong[b.Codec] += int(b.NumRecords)
		}
	}
	if len(wrong) > 0 {
		var codes []int
		for c := range wrong {
			codes = append(codes, int(c))
		}
		sort.Ints(codes)
		p := fmt.Sprintf("%s cell: records stored in batches with codec attribute", spec.Codec)
		for _, c := range codes {
			p += fmt.Sprintf(" %d (%d records)", c, wrong[uint8(c)])
		}
		p += fmt.Sprintf(", want %d in all but lone batches under %d bytes", want, loneBatchMaxBytes)
		if spec.Caps.compressionGate != nil {
			if why := spec.Caps.compressionGate(ctx, spec.Codec); why != "" {
				p += ": " + why
			}
		}
		problems = append(problems, p)
	}
	return problems
}
