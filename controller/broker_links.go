package controller

import (
	"context"
	"maps"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.LinkStore = (*BrokerClient)(nil)

// CreateClusterLink stores a cluster link (metadata.LinkStore).
func (c *BrokerClient) CreateClusterLink(ctx context.Context, name string, configs map[string]string, validateOnly bool) error {
	_, err := rpc(ctx, c, pb.ControllerClient.CreateClusterLink,
		&pb.CreateClusterLinkRequest{Name: name, Configs: maps.Clone(configs), ValidateOnly: validateOnly})
	return err
}

// DeleteClusterLink removes a cluster link (metadata.LinkStore).
func (c *BrokerClient) DeleteClusterLink(ctx context.Context, name string, force bool) error {
	_, err := rpc(ctx, c, pb.ControllerClient.DeleteClusterLink, &pb.DeleteClusterLinkRequest{Name: name, Force: force})
	return err
}

// CreateMirrorTopic creates a mirror topic (metadata.LinkStore).
func (c *BrokerClient) CreateMirrorTopic(ctx context.Context, s metadata.MirrorSpec) error {
	req := &pb.CreateMirrorTopicRequest{Topic: s.Topic, Link: s.Link, SourceTopic: s.SourceTopic, NumPartitions: s.Partitions,
		ReplicationFactor: int32(s.ReplicationFactor), Configs: maps.Clone(s.Configs), Existing: s.Existing}
	if s.ID != ([16]byte{}) {
		req.Id = slices.Clone(s.ID[:])
	}
	_, err := rpc(ctx, c, pb.ControllerClient.CreateMirrorTopic, req)
	return err
}

// StopMirrors promotes mirror topics (metadata.LinkStore).
func (c *BrokerClient) StopMirrors(ctx context.Context, topics []string) []error {
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.AlterMirrorTopics,
		&pb.AlterMirrorTopicsRequest{Topics: slices.Clone(topics), State: int32(metadata.MirrorStopped)})
	return errorList(len(topics), resp.GetErrors(), err)
}

// RaiseMirrorEpoch raises a mirror partition's source epoch floor (metadata.LinkStore).
func (c *BrokerClient) RaiseMirrorEpoch(ctx context.Context, topic string, partition, epoch int32) error {
	_, err := rpc(ctx, c, pb.ControllerClient.RaiseMirrorEpoch, &pb.RaiseMirrorEpochRequest{Topic: topic, Partition: partition, Epoch: epoch})
	return err
}
