package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TieredPartition is where a partition of a tiered topic (remote.storage.enable, KIP-405)
// keeps its records, as its leader reports them through ListOffsets and DescribeLogDirs.
// Kafka's admin API carries no remote log size, so the remote part is given in offsets.
type TieredPartition struct {
	Partition int32
	// LogStart is the partition's first offset, local or remote (ListOffsets earliest).
	LogStart int64
	// LocalLogStart is the leader's first local offset (ListOffsets -4, KIP-1005, v8):
	// the offsets from LogStart up to it are served from the remote log only.
	LocalLogStart int64
	// HighestRemote is the last offset the remote log holds (ListOffsets -5, v9), -1
	// when it holds none.
	HighestRemote int64
	// LogEnd is the next offset to be written (ListOffsets latest).
	LogEnd int64
	// LocalSize is the bytes of the leader's local replica (DescribeLogDirs), -1 when
	// the leader did not report it.
	LocalSize int64
	// Err is why the partition could not be asked.
	Err error
}

// tieredTimestamps are the ListOffsets timestamps TieredPartitions asks, in its fields'
// order.
var tieredTimestamps = [...]int64{-2, -4, -5, -1}

// TieredPartitions asks the leaders of a topic's partitions for their local and remote
// bounds and their local sizes. leaders maps each partition to its leader's node id.
func (c *Client) TieredPartitions(ctx context.Context, topic string, leaders map[int32]int32) ([]TieredPartition, error) {
	out := make(map[int32]*TieredPartition, len(leaders))
	var parts []int32
	for p := range leaders {
		out[p] = &TieredPartition{Partition: p, LocalSize: -1}
		parts = append(parts, p)
	}
	for i, ts := range tieredTimestamps {
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, ts, -1
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		// franz-go sends each partition to its leader and merges the answers.
		resp, err := req.RequestWith(ctx, c.kc)
		if err != nil {
			return nil, fmt.Errorf("list offsets (%d) of topic %s: %w", ts, topic, err)
		}
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				tp := out[rp.Partition]
				if tp == nil {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					if tp.Err == nil {
						tp.Err = fmt.Errorf("list offsets (%d): %w", ts, err)
					}
					continue
				}
				switch i {
				case 0:
					tp.LogStart = rp.Offset
				case 1:
					tp.LocalLogStart = rp.Offset
				case 2:
					tp.HighestRemote = rp.Offset
				case 3:
					tp.LogEnd = rp.Offset
				}
			}
		}
	}
	set := kadm.TopicsSet{}
	set.Add(topic, parts...)
	dirs, err := c.adm.DescribeAllLogDirs(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describe log dirs of topic %s: %w", topic, err)
	}
	for p, leader := range leaders {
		for _, d := range dirs[leader] {
			if d.Err != nil {
				continue
			}
			if dp, ok := d.Topics[topic][p]; ok {
				out[p].LocalSize = dp.Size
			}
		}
	}
	res := make([]TieredPartition, 0, len(out))
	for _, p := range parts {
		res = append(res, *out[p])
	}
	slices.SortFunc(res, func(a, b TieredPartition) int { return int(a.Partition - b.Partition) })
	return res, nil
}
