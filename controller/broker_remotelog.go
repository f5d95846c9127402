package controller

import (
	"context"
	"fmt"
	"slices"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

var _ metadata.RemoteLogStore = (*BrokerClient)(nil)

// CommitRemoteSegment records an uploaded segment of a partition this broker leads at
// leaderEpoch (metadata.RemoteLogStore).
func (c *BrokerClient) CommitRemoteSegment(ctx context.Context, topic string, leaderEpoch int32, seg metadata.RemoteSegment) error {
	return c.updateRemoteLog(ctx, &pb.RemoteLogRecord{Topic: topic, TopicId: slices.Clone(seg.TopicID[:]), Partition: seg.Partition,
		LeaderEpoch: leaderEpoch, Op: &pb.RemoteLogRecord_Commit{Commit: remoteSegmentToPB(&seg)}})
}

// StartRemoteDelete takes the earliest remote segments out of service and moves the
// remote log start (metadata.RemoteLogStore).
func (c *BrokerClient) StartRemoteDelete(ctx context.Context, topic string, topicID [16]byte, partition, leaderEpoch int32, uploadIDs []string, logStart int64) error {
	return c.updateRemoteLog(ctx, &pb.RemoteLogRecord{Topic: topic, TopicId: slices.Clone(topicID[:]), Partition: partition,
		LeaderEpoch: leaderEpoch, Op: &pb.RemoteLogRecord_DeleteStart{DeleteStart: &pb.RemoteDeleteStart{UploadIds: uploadIDs, LogStart: logStart}}})
}

// FinishRemoteDelete drops the records of deleted remote segments (metadata.RemoteLogStore).
func (c *BrokerClient) FinishRemoteDelete(ctx context.Context, topic string, topicID [16]byte, partition, leaderEpoch int32, uploadIDs []string) error {
	return c.updateRemoteLog(ctx, &pb.RemoteLogRecord{Topic: topic, TopicId: slices.Clone(topicID[:]), Partition: partition,
		LeaderEpoch: leaderEpoch, Op: &pb.RemoteLogRecord_DeleteFinish{DeleteFinish: &pb.RemoteDeleteFinish{UploadIds: uploadIDs}}})
}

// updateRemoteLog sends one remote log change and returns once this broker's metadata
// cache shows the controller's answer: an uploader that lists the store right after a
// commit must not take the upload it just committed for an orphan because its cache
// lags. A wait cut short is an error, so the caller treats the change as indeterminate.
func (c *BrokerClient) updateRemoteLog(ctx context.Context, rec *pb.RemoteLogRecord) error {
	rec.Broker = c.cfg.NodeID
	resp, err := send(ctx, c.q, c.cfg.RequestTimeout, pb.ControllerClient.UpdateRemoteLog, &pb.UpdateRemoteLogRequest{Record: rec})
	if err != nil {
		return err
	}
	if err := c.WaitForOffset(ctx, resp.GetMetadataOffset()); err != nil {
		return fmt.Errorf("controller client: remote log change answered at metadata offset %d, not yet in the cache: %w", resp.GetMetadataOffset(), err)
	}
	return fromPBError(resp.GetError())
}

// RemotePurged reports a deleted topic's partition's remote objects gone, which drops
// its purge entry (metadata.RemoteLogStore).
func (c *BrokerClient) RemotePurged(ctx context.Context, topicID [16]byte, partition int32) error {
	return c.updateRemoteLog(ctx, &pb.RemoteLogRecord{TopicId: slices.Clone(topicID[:]), Partition: partition,
		Op: &pb.RemoteLogRecord_Purged{Purged: &pb.RemotePurged{}}})
}
