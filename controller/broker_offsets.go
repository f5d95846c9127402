package controller

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// AllocateProducerIDs hands this broker a block of producer ids unique in the cluster.
func (c *BrokerClient) AllocateProducerIDs(ctx context.Context) (int64, int32, error) {
	// Not rpc: each attempt asks with the broker epoch current at that attempt, since the
	// broker may register again while the call is retried.
	var resp *pb.AllocateProducerIdsResponse
	err := c.q.call(ctx, c.cfg.RequestTimeout, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = cl.AllocateProducerIds(ctx, &pb.AllocateProducerIdsRequest{BrokerId: c.cfg.NodeID, BrokerEpoch: c.BrokerEpoch()})
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	if err := fromPBError(resp.Error); err != nil {
		return 0, 0, err
	}
	return resp.FirstProducerId, resp.Count, nil
}

func offsetEntryToPB(o metadata.CommittedOffset) *pb.OffsetEntry { return offsetToPB(o) }

func offsetFromPB(e *pb.OffsetEntry) metadata.CommittedOffset {
	o := metadata.CommittedOffset{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, LeaderEpoch: e.LeaderEpoch, Metadata: e.Metadata}
	if e.CommitTimeMs != 0 {
		o.CommitTime = time.UnixMilli(e.CommitTimeMs)
	}
	if e.ExpireTimeMs != 0 {
		o.ExpireTime = time.UnixMilli(e.ExpireTimeMs)
	}
	return o
}

func topicPartitionsPB(topics map[string][]int32) []*pb.TopicPartitions {
	out := make([]*pb.TopicPartitions, 0, len(topics))
	for _, t := range slices.Sorted(maps.Keys(topics)) {
		out = append(out, &pb.TopicPartitions{Topic: t, Partitions: slices.Clone(topics[t])})
	}
	return out
}

// CommitOffsets stores a group's committed offsets. The controller gathers concurrent
// commits into one Raft record. A zero CommitTime is set by the controller.
func (c *BrokerClient) CommitOffsets(ctx context.Context, group string, fence metadata.GroupFence, offsets []metadata.CommittedOffset) error {
	req := &pb.CommitOffsetsRequest{Group: group, Offsets: make([]*pb.OffsetEntry, len(offsets)),
		CoordinatorId: fence.Broker, CoordinatorEpoch: fence.Epoch}
	for i, o := range offsets {
		req.Offsets[i] = offsetEntryToPB(o)
	}
	_, err := rpc(ctx, c, pb.ControllerClient.CommitOffsets, req)
	return err
}

// FetchOffsets returns a group's committed offsets (only partitions that have one),
// sorted by topic and partition; nil topics means all of them, a topic with no
// partitions all of that topic's. The active controller confirms its leadership first,
// so a commit acknowledged before the call is always seen.
func (c *BrokerClient) FetchOffsets(ctx context.Context, group string, topics map[string][]int32) ([]metadata.CommittedOffset, error) {
	req := &pb.FetchOffsetsRequest{Group: group, AllTopics: topics == nil, Topics: topicPartitionsPB(topics)}
	resp, err := rpc(ctx, c, pb.ControllerClient.FetchOffsets, req)
	if err != nil {
		return nil, err
	}
	out := make([]metadata.CommittedOffset, len(resp.Offsets))
	for i, e := range resp.Offsets {
		out[i] = offsetFromPB(e)
	}
	return out, nil
}

// DeleteGroupOffsets removes a group's committed offsets; nil topics means all.
func (c *BrokerClient) DeleteGroupOffsets(ctx context.Context, group string, fence metadata.GroupFence, topics map[string][]int32) error {
	req := &pb.DeleteGroupOffsetsRequest{Group: group, AllTopics: topics == nil, Topics: topicPartitionsPB(topics),
		CoordinatorId: fence.Broker, CoordinatorEpoch: fence.Epoch}
	_, err := rpc(ctx, c, pb.ControllerClient.DeleteGroupOffsets, req)
	return err
}

// ReadOffsetsLog reads one partition of the __consumer_offsets view from the active
// controller; see metadata.Store.
func (c *BrokerClient) ReadOffsetsLog(ctx context.Context, partition int32, from int64, maxBytes int32, maxWait time.Duration) (metadata.OffsetsLogSlice, error) {
	req := &pb.ReadOffsetsLogRequest{Partition: partition, FromOffset: from, MaxBytes: maxBytes, MaxWaitMs: int32(min(maxWait, time.Hour).Milliseconds())}
	resp, err := rpc(ctx, c, pb.ControllerClient.ReadOffsetsLog, req)
	if err != nil {
		return metadata.OffsetsLogSlice{}, err
	}
	out := metadata.OffsetsLogSlice{LogStart: resp.LogStart, LogEnd: resp.LogEnd, Records: make([]metadata.OffsetsLogRecord, len(resp.Records))}
	for i, r := range resp.Records {
		out.Records[i] = metadata.OffsetsLogRecord{LogOffset: r.Offset.GetLogOffset(), Group: r.Group, Tombstone: r.Tombstone, Offset: offsetFromPB(r.Offset)}
	}
	return out, nil
}

// ListOffsetGroups lists the groups that have committed offsets.
func (c *BrokerClient) ListOffsetGroups(ctx context.Context) ([]string, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.ListOffsetGroups, &pb.ListOffsetGroupsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Groups, nil
}
