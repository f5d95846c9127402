package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

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

// DeleteTopics deletes topics by name.
func (c *BrokerClient) DeleteTopics(ctx context.Context, names []string) []error {
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.DeleteTopics, &pb.DeleteTopicsRequest{Names: names})
	return errorList(len(names), resp.GetErrors(), err)
}

// CreatePartitions grows topics.
func (c *BrokerClient) CreatePartitions(ctx context.Context, specs []metadata.PartitionsSpec, validateOnly bool) []error {
	req := &pb.CreatePartitionsRequest{ValidateOnly: validateOnly}
	for _, s := range specs {
		req.Specs = append(req.Specs, &pb.PartitionsSpec{Topic: s.Topic, Count: s.Count, Assignments: replicaLists(s.Assignments)})
	}
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.CreatePartitions, req)
	return errorList(len(specs), resp.GetErrors(), err)
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
