package controller

import (
	"context"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) CreateClusterLink(ctx context.Context, req *pb.CreateClusterLinkRequest) (*pb.CreateClusterLinkResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	if err := metadata.ValidateLinkName(req.Name); err != nil {
		return &pb.CreateClusterLinkResponse{Error: toPBError(err)}, nil
	}
	if err := metadata.ValidateLinkConfigs(req.Configs); err != nil {
		return &pb.CreateClusterLinkResponse{Error: toPBError(err)}, nil
	}
	if v.s.fsm.image().Links[req.Name] != nil {
		return &pb.CreateClusterLinkResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "cluster link %q already exists", req.Name))}, nil
	}
	rec := &pb.ClusterLinksRecord{TimeMs: time.Now().UnixMilli(), Links: []*pb.ClusterLinkState{{
		Name: req.Name, Id: newTopicID(), Configs: maps.Clone(req.Configs), CreatedMs: time.Now().UnixMilli()}}}
	res, err := v.applyOrValidate(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}}, req.ValidateOnly)
	if err != nil {
		return nil, err
	}
	if res.err == nil && !req.ValidateOnly {
		v.s.log.Info("cluster link created", "link", req.Name, "bootstrap_servers", req.Configs[metadata.LinkBootstrapServers])
	}
	return &pb.CreateClusterLinkResponse{Error: toPBError(res.err)}, nil
}

func (v *service) DeleteClusterLink(ctx context.Context, req *pb.DeleteClusterLinkRequest) (*pb.DeleteClusterLinkResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	im := v.s.fsm.image()
	if im.Links[req.Name] == nil {
		return &pb.DeleteClusterLinkResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "cluster link %q does not exist", req.Name))}, nil
	}
	if !req.Force {
		for _, m := range im.Mirrors {
			if m.Link == req.Name && m.Active() {
				return &pb.DeleteClusterLinkResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest,
					"cluster link %q has active mirror topics (%s among them): promote them first, or force", req.Name, m.Topic))}, nil
			}
		}
	}
	rec := &pb.ClusterLinksRecord{TimeMs: time.Now().UnixMilli(), DeletedLinks: []string{req.Name}}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.DeleteClusterLinkResponse{Error: toPBError(res.err)}, nil
}

func (v *service) CreateMirrorTopic(ctx context.Context, req *pb.CreateMirrorTopicRequest) (*pb.CreateMirrorTopicResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	fail := func(err error) (*pb.CreateMirrorTopicResponse, error) {
		return &pb.CreateMirrorTopicResponse{Error: toPBError(err)}, nil
	}
	if req.SourceTopic == "" {
		return fail(kafkaErrorf(kerr.InvalidRequest, "a mirror topic needs a source topic"))
	}
	if req.Topic == "" {
		req.Topic = req.SourceTopic
	}
	if v.s.fsm.image().Links[req.Link] == nil {
		return fail(kafkaErrorf(kerr.InvalidRequest, "cluster link %q does not exist", req.Link))
	}
	if err := metadata.ValidateTopicName(req.Topic); err != nil {
		return fail(err)
	}
	if err := topicconfig.Validate(req.Configs); err != nil {
		return fail(err)
	}
	if req.Existing {
		return v.convertToMirror(ctx, req)
	}
	id := req.Id
	if len(id) == 0 {
		id = newTopicID()
	}
	rf := req.ReplicationFactor
	if rf <= 0 {
		rf = int32(v.s.cfg.DefaultReplicationFactor)
	}
	nt := &pb.NewTopic{Name: req.Topic, Id: id, Seed: randomSeed(), Configs: maps.Clone(req.Configs),
		NumPartitions: req.NumPartitions, ReplicationFactor: rf}
	now := time.Now().UnixMilli()
	rec := &pb.ClusterLinksRecord{TimeMs: now, MirrorTopics: []*pb.NewTopic{nt}, Mirrors: []*pb.MirrorTopicState{{
		Topic: req.Topic, Link: req.Link, SourceTopic: req.SourceTopic, State: int32(metadata.MirrorActive), StateChangedMs: now}}}
	if old := v.s.fsm.image().Mirrors[req.Topic]; old != nil && v.s.fsm.image().Topic(req.Topic) != nil {
		t := v.s.fsm.image().Topic(req.Topic)
		if string(t.ID[:]) == string(id) {
			return &pb.CreateMirrorTopicResponse{}, nil // a retry of a create that committed
		}
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err == nil {
		v.s.log.Info("mirror topic created", "topic", req.Topic, "link", req.Link, "source_topic", req.SourceTopic, "partitions", req.NumPartitions)
	}
	return &pb.CreateMirrorTopicResponse{Error: toPBError(res.err)}, nil
}

func (v *service) AlterMirrorTopics(ctx context.Context, req *pb.AlterMirrorTopicsRequest) (*pb.AlterMirrorTopicsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	resp := &pb.AlterMirrorTopicsResponse{Errors: make([]*pb.Error, len(req.Topics))}
	if metadata.MirrorState(req.State) != metadata.MirrorStopped {
		for i := range req.Topics {
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.InvalidRequest, "mirror topics can only be stopped (promoted)"))
		}
		return resp, nil
	}
	im := v.s.fsm.image()
	now := time.Now().UnixMilli()
	rec := &pb.ClusterLinksRecord{TimeMs: now}
	var positions []int
	for i, topic := range req.Topics {
		m := im.Mirrors[topic]
		if m == nil {
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.InvalidRequest, "topic %q is not a mirror topic", topic))
			continue
		}
		if !m.Active() {
			continue // already promoted: nothing to do, as for a retry
		}
		st := mirrorToPB(m)
		st.State, st.StateChangedMs = int32(metadata.MirrorStopped), now
		rec.Mirrors = append(rec.Mirrors, st)
		positions = append(positions, i)
	}
	if len(rec.Mirrors) == 0 {
		return resp, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	for _, i := range positions {
		resp.Errors[i] = toPBError(res.err)
	}
	if res.err == nil {
		v.s.log.Info("mirror topics promoted", "topics", req.Topics)
	}
	return resp, nil
}

func (v *service) RaiseMirrorEpoch(ctx context.Context, req *pb.RaiseMirrorEpochRequest) (*pb.RaiseMirrorEpochResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if m := v.s.fsm.image().Mirrors[req.Topic]; m != nil && int(req.Partition) < len(m.SourceEpochs) && m.SourceEpochs[req.Partition] >= req.Epoch {
		return &pb.RaiseMirrorEpochResponse{}, nil
	}
	rec := &pb.ClusterLinksRecord{TimeMs: time.Now().UnixMilli(), Epochs: []*pb.MirrorEpoch{{Topic: req.Topic, Partition: req.Partition, Epoch: req.Epoch}}}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.RaiseMirrorEpochResponse{Error: toPBError(res.err)}, nil
}

// convertToMirror makes an existing topic a mirror (failback).
func (v *service) convertToMirror(ctx context.Context, req *pb.CreateMirrorTopicRequest) (*pb.CreateMirrorTopicResponse, error) {
	im := v.s.fsm.image()
	t := im.Topic(req.Topic)
	if t == nil {
		return &pb.CreateMirrorTopicResponse{Error: toPBError(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", req.Topic))}, nil
	}
	if m := im.Mirrors[req.Topic]; m.Active() {
		return &pb.CreateMirrorTopicResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "topic %q is already an active mirror", req.Topic))}, nil
	}
	if int(req.NumPartitions) != len(t.Partitions) {
		return &pb.CreateMirrorTopicResponse{Error: toPBError(kafkaErrorf(kerr.InvalidPartitions,
			"topic %q has %d partitions, its source %q has %d", req.Topic, len(t.Partitions), req.SourceTopic, req.NumPartitions))}, nil
	}
	now := time.Now().UnixMilli()
	rec := &pb.ClusterLinksRecord{TimeMs: now, Mirrors: []*pb.MirrorTopicState{{
		Topic: req.Topic, Link: req.Link, SourceTopic: req.SourceTopic, State: int32(metadata.MirrorActive), StateChangedMs: now}}}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ClusterLinks{ClusterLinks: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err == nil {
		v.s.log.Info("topic made a mirror", "topic", req.Topic, "link", req.Link, "source_topic", req.SourceTopic)
	}
	return &pb.CreateMirrorTopicResponse{Error: toPBError(res.err)}, nil
}
