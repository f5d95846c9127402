package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// The metadata.Store operations: each is forwarded to the active controller and retried
// across leader changes until ctx is done.

// controllerMethod is a unary method of the controller service as a method expression,
// such as pb.ControllerClient.CommitOffsets.
type controllerMethod[Req, Resp any] func(pb.ControllerClient, context.Context, Req, ...grpc.CallOption) (Resp, error)

// send calls method with req through the quorum (see quorumConns.call): retried across
// leader changes and unreachable controllers until it is answered or ctx is done, each
// attempt bounded by attempt. The error is the call's own; the answer's error fields
// are left to the caller.
func send[Req, Resp any](ctx context.Context, q *quorumConns, attempt time.Duration, method controllerMethod[Req, Resp], req Req) (Resp, error) {
	var resp Resp
	err := q.call(ctx, attempt, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = method(cl, ctx, req)
		return err
	})
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

// answer is a controller response with a call-wide error.
type answer interface{ GetError() *pb.Error }

// rpc calls method with req as send does, each attempt bounded by the request timeout,
// and returns the answer, or the call's error, or else the answer's own error.
func rpc[Req any, Resp answer](ctx context.Context, c *BrokerClient, method controllerMethod[Req, Resp], req Req) (Resp, error) {
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, method, req)
	if err == nil {
		err = fromPBError(resp.GetError())
	}
	if err != nil {
		var zero Resp
		return zero, err
	}
	return resp, nil
}

func replicaLists(as [][]int32) []*pb.ReplicaList {
	if len(as) == 0 {
		return nil
	}
	out := make([]*pb.ReplicaList, len(as))
	for i, a := range as {
		out[i] = &pb.ReplicaList{Replicas: slices.Clone(a)}
	}
	return out
}

// CreateTopics creates topics (or, with validateOnly, checks that they could be created).
func (c *BrokerClient) CreateTopics(ctx context.Context, specs []metadata.TopicSpec, validateOnly bool) []metadata.TopicResult {
	req := &pb.CreateTopicsRequest{ValidateOnly: validateOnly}
	for _, s := range specs {
		req.Topics = append(req.Topics, &pb.CreatableTopic{Name: s.Name, NumPartitions: s.NumPartitions,
			ReplicationFactor: int32(s.ReplicationFactor), Assignments: replicaLists(s.Assignments), Configs: maps.Clone(s.Configs)})
	}
	out := make([]metadata.TopicResult, len(specs))
	for i, s := range specs {
		out[i].Name = s.Name
	}
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.CreateTopics, req)
	if err == nil && len(resp.Results) != len(specs) {
		err = fmt.Errorf("controller answered %d results for %d topics", len(resp.Results), len(specs))
	}
	for i := range out {
		if err != nil {
			out[i].Err = err
			continue
		}
		r := resp.Results[i]
		if out[i].Err = fromPBError(r.Error); out[i].Err == nil && r.Topic != nil {
			if out[i].Topic, out[i].Err = topicFromPB(r.Topic); out[i].Err != nil {
				out[i].Topic = nil
			}
		}
	}
	return out
}

func errorList(n int, errs []*pb.Error, err error) []error {
	out := make([]error, n)
	if err == nil && len(errs) != n {
		err = fmt.Errorf("controller answered %d results for %d requests", len(errs), n)
	}
	for i := range out {
		if err != nil {
			out[i] = err
		} else {
			out[i] = fromPBError(errs[i])
		}
	}
	return out
}

// DeleteTopics deletes topics by name.
func (c *BrokerClient) DeleteTopics(ctx context.Context, names []string) []error {
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.DeleteTopics, &pb.DeleteTopicsRequest{Names: names})
	if err != nil {
		return errorList(len(names), nil, err)
	}
	return errorList(len(names), resp.Errors, nil)
}

// CreatePartitions grows topics.
func (c *BrokerClient) CreatePartitions(ctx context.Context, specs []metadata.PartitionsSpec, validateOnly bool) []error {
	req := &pb.CreatePartitionsRequest{ValidateOnly: validateOnly}
	for _, s := range specs {
		req.Specs = append(req.Specs, &pb.PartitionsSpec{Topic: s.Topic, Count: s.Count, Assignments: replicaLists(s.Assignments)})
	}
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.CreatePartitions, req)
	if err != nil {
		return errorList(len(specs), nil, err)
	}
	return errorList(len(specs), resp.Errors, nil)
}

// AlterTopicConfigs changes one topic's configs.
func (c *BrokerClient) AlterTopicConfigs(ctx context.Context, topic string, ops []metadata.ConfigOp, incremental, validateOnly bool) error {
	req := &pb.AlterTopicConfigsRequest{Topic: topic, Incremental: incremental, ValidateOnly: validateOnly}
	for _, op := range ops {
		req.Ops = append(req.Ops, &pb.ConfigOp{Name: op.Name, Value: op.Value, Op: int32(op.Op)})
	}
	_, err := rpc(ctx, c, pb.ControllerClient.AlterTopicConfigs, req)
	return err
}

// AlterPartition proposes a new ISR for a partition this broker leads.
func (c *BrokerClient) AlterPartition(ctx context.Context, r metadata.AlterPartitionRequest) (metadata.Partition, error) {
	req := &pb.AlterPartitionRequest{BrokerId: c.cfg.NodeID, BrokerEpoch: c.BrokerEpoch(), Topic: r.Topic, Partition: r.Partition,
		LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch, NewIsr: slices.Clone(r.NewISR)}
	resp, err := rpc(ctx, c, pb.ControllerClient.AlterPartition, req)
	if err != nil {
		return metadata.Partition{}, err
	}
	if resp.Partition == nil {
		return metadata.Partition{}, fmt.Errorf("controller answered AlterPartition without a partition")
	}
	return partitionFromPB(r.Topic, resp.Partition), nil
}

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

// ElectLeaders runs a PREFERRED (preferred) or UNCLEAN election for the given partitions,
// nil for all of them, and returns each partition's outcome: nil when it was elected,
// else a Kafka error (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
// ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION). With nil partitions, the
// partitions that needed no election are left out.
func (c *BrokerClient) ElectLeaders(ctx context.Context, preferred bool, partitions map[string][]int32) (map[string]map[int32]error, error) {
	req := &pb.ElectLeadersRequest{Type: pb.ElectionType_ELECTION_TYPE_UNCLEAN, AllPartitions: partitions == nil,
		Partitions: topicPartitionsPB(partitions)}
	if preferred {
		req.Type = pb.ElectionType_ELECTION_TYPE_PREFERRED
	}
	resp, err := rpc(ctx, c, pb.ControllerClient.ElectLeaders, req)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]error{}
	for _, r := range resp.Results {
		if out[r.Topic] == nil {
			out[r.Topic] = map[int32]error{}
		}
		out[r.Topic][r.Partition] = fromPBError(r.Error)
	}
	return out, nil
}
