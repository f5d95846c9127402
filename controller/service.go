package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/twmb/franz-go/pkg/kerr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"

	pb "github.com/shalelog/shale/controller/proto"
)

const (
	// watchProgressInterval is how often a quiet WatchMetadata stream says it is alive.
	watchProgressInterval = time.Second
	// imageChunkPartitions is about how many partitions one image chunk carries.
	imageChunkPartitions = 20_000
)

// service is the gRPC face of a Server. Requests that a Kafka error answers get it in the
// response; a controller that is not active answers UNAVAILABLE with a NotLeader detail.
type service struct {
	pb.UnimplementedControllerServer
	s *Server
}

func (v *service) rpcError(err error) error {
	switch {
	case isLeadershipError(err):
		id, addr := v.s.Leader()
		if id == v.s.cfg.NodeID {
			id, addr = -1, "" // still taking office, or just lost it
		}
		return notLeaderStatus(id, addr)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

// outcome splits an error into a Kafka error for the response and a transport error.
func (v *service) outcome(err error) (*pb.Error, error) {
	if err == nil {
		return nil, nil
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return toPBError(err), nil
	}
	return nil, v.rpcError(err)
}

func (v *service) RegisterBroker(ctx context.Context, req *pb.RegisterBrokerRequest) (*pb.RegisterBrokerResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	fail := func(err error) (*pb.RegisterBrokerResponse, error) {
		return &pb.RegisterBrokerResponse{Error: toPBError(err)}, nil
	}
	switch {
	case req.BrokerId < 0:
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker id %d is negative", req.BrokerId))
	case req.Incarnation == "":
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker %d registers without an incarnation id", req.BrokerId))
	case len(req.Listeners) == 0:
		return fail(kafkaErrorf(kerr.InvalidRequest, "broker %d registers without a listener", req.BrokerId))
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if old := v.s.fsm.brokerState(req.BrokerId); old != nil && old.Incarnation != req.Incarnation && !old.Fenced {
		if seen, ok := ls.lastSeen[req.BrokerId]; ok && time.Since(seen) <= v.s.cfg.SessionTimeout {
			return fail(kafkaErrorf(kerr.DuplicateBrokerRegistration,
				"broker %d is registered by another process whose session is alive", req.BrokerId))
		}
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_RegisterBroker{RegisterBroker: &pb.RegisterBrokerRecord{
		BrokerId: req.BrokerId, Incarnation: req.Incarnation, Listeners: req.Listeners, Rack: req.Rack}}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		return fail(res.err)
	}
	ls.lastSeen[req.BrokerId] = time.Now()
	epoch := res.value.(registerResult).epoch
	v.s.log.Info("broker registered", "broker", req.BrokerId, "epoch", epoch, "rack", req.Rack)
	return &pb.RegisterBrokerResponse{BrokerEpoch: epoch, ClusterId: v.s.fsm.image().ClusterID}, nil
}

func (v *service) BrokerHeartbeat(ctx context.Context, req *pb.BrokerHeartbeatRequest) (*pb.BrokerHeartbeatResponse, error) {
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.BrokerHeartbeatResponse{SessionTimeoutMs: v.s.cfg.SessionTimeout.Milliseconds()}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	b := v.s.fsm.brokerState(req.BrokerId)
	switch {
	case b == nil:
		resp.Error = toPBError(kafkaErrorf(kerr.BrokerIDNotRegistered, "broker %d is not registered", req.BrokerId))
		return resp, nil
	case b.Epoch != req.BrokerEpoch:
		resp.Error = toPBError(kafkaErrorf(kerr.StaleBrokerEpoch, "broker %d has epoch %d, not %d", req.BrokerId, b.Epoch, req.BrokerEpoch))
		return resp, nil
	}
	ls.lastSeen[req.BrokerId] = time.Now()
	v.s.noteBrokerOffsetLocked(ls, req.BrokerId, req.MetadataOffset)
	switch {
	case req.WantShutdown && req.Stopping && !b.Fenced:
		err = v.s.fenceLocked(ls, &pb.FenceBrokersRecord{BrokerIds: []int32{b.Id}, BrokerEpochs: []int64{b.Epoch}, Reason: "broker stopping"})
		if err == nil {
			v.s.log.Info("broker fenced: it is stopping", "broker", b.Id)
		}
	case req.WantShutdown && !b.Fenced && (!b.InControlledShutdown || v.s.fsm.leadsMovable(b.Id)):
		// Again while it leads something movable: an ISR member may have come back since.
		first := !b.InControlledShutdown
		var res applyResult
		res, _, err = v.s.propose(ctx, &pb.Record{Record: &pb.Record_ControlledShutdown{ControlledShutdown: &pb.ControlledShutdownRecord{
			BrokerId: b.Id, BrokerEpoch: b.Epoch}}})
		if err == nil && res.err != nil {
			err = res.err
		}
		if err == nil && first {
			v.s.log.Info("broker in controlled shutdown", "broker", b.Id)
		}
	case !req.WantShutdown && b.Fenced && ReadyToUnfence(b.Epoch, ls.fencedAt[b.Id], req.MetadataOffset):
		var res applyResult
		res, _, err = v.s.propose(ctx, &pb.Record{Record: &pb.Record_UnfenceBroker{UnfenceBroker: &pb.UnfenceBrokerRecord{BrokerId: b.Id, BrokerEpoch: b.Epoch}}})
		if err == nil && res.err != nil {
			err = res.err
		}
		if err == nil {
			delete(ls.fencedAt, b.Id)
			v.s.log.Info("broker unfenced", "broker", b.Id, "epoch", b.Epoch)
		}
	}
	if resp.Error, err = v.outcome(err); err != nil {
		return nil, err
	}
	if b = v.s.fsm.brokerState(req.BrokerId); b != nil {
		resp.Fenced = b.Fenced
		resp.ShouldShutDown = req.WantShutdown && (b.Fenced || !v.s.fsm.leadsMovable(b.Id))
	}
	resp.MetadataOffset = v.s.fsm.image().Offset
	return resp, nil
}

func (v *service) WatchMetadata(req *pb.WatchMetadataRequest, stream pb.Controller_WatchMetadataServer) error {
	ctx := stream.Context()
	ls, err := v.s.awaitSession(ctx)
	if err != nil {
		return v.rpcError(err)
	}
	offset, clusterID := req.FromOffset, req.ClusterId
	ping := time.NewTicker(watchProgressInterval)
	defer ping.Stop()
	f := v.s.fsm
	for {
		f.mu.RLock()
		im := f.img
		ds, ok := f.deltas.since(offset, im.Offset)
		if req.WantImage {
			ok, req.WantImage = false, false
		}
		if clusterID != "" && im.ClusterID != "" && clusterID != im.ClusterID {
			ok = false
		}
		var brokers []*pb.BrokerState
		if !ok {
			brokers = f.sortedBrokersLocked()
		}
		changed := f.deltas.changed
		f.mu.RUnlock()

		if ok {
			for _, d := range ds {
				if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Delta{Delta: d}}); err != nil {
					return err
				}
			}
		} else {
			for _, c := range imageChunks(im, brokers, imageChunkPartitions) {
				if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Image{Image: c}}); err != nil {
					return err
				}
			}
		}
		offset, clusterID = im.Offset, im.ClusterID

		select {
		case <-changed:
		case <-ping.C:
			if err := stream.Send(&pb.MetadataUpdate{Update: &pb.MetadataUpdate_Progress{Progress: offset}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-ls.ctx.Done():
			return v.rpcError(errNotLeader)
		}
	}
}

func (v *service) CreateTopics(ctx context.Context, req *pb.CreateTopicsRequest) (*pb.CreateTopicsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	resp := &pb.CreateTopicsResponse{Results: make([]*pb.CreateTopicResult, len(req.Topics))}
	counts := map[string]int{}
	for _, t := range req.Topics {
		counts[t.Name]++
	}
	rec := &pb.CreateTopicsRecord{}
	var positions []int
	for i, t := range req.Topics {
		resp.Results[i] = &pb.CreateTopicResult{Name: t.Name}
		nt, err := v.newTopic(t, counts[t.Name])
		if err != nil {
			resp.Results[i].Error = toPBError(err)
			continue
		}
		rec.Topics = append(rec.Topics, nt)
		positions = append(positions, i)
	}
	if len(rec.Topics) == 0 {
		return resp, nil
	}
	full := &pb.Record{Record: &pb.Record_CreateTopics{CreateTopics: rec}}
	res, err := v.applyOrValidate(ctx, full, req.ValidateOnly)
	if err != nil {
		return nil, err
	}
	results, _ := res.value.([]createTopicResult)
	for j, pos := range positions {
		switch {
		case res.err != nil:
			resp.Results[pos].Error = toPBError(res.err)
		case j >= len(results):
			resp.Results[pos].Error = toPBError(errors.New("missing result"))
		case results[j].err != nil:
			resp.Results[pos].Error = toPBError(results[j].err)
		default:
			resp.Results[pos].Topic = topicToPB(results[j].topic)
		}
	}
	if !req.ValidateOnly {
		for _, r := range resp.Results {
			if r.Error == nil {
				v.s.log.Info("topic created", "topic", r.Name, "partitions", len(r.Topic.Partitions))
			}
		}
	}
	return resp, nil
}

// newTopic resolves the defaults of one requested topic and validates what only the
// leader checks (configs, request shape); the FSM checks the rest against the state.
func (v *service) newTopic(t *pb.CreatableTopic, count int) (*pb.NewTopic, error) {
	if count > 1 {
		return nil, kafkaErrorf(kerr.InvalidRequest, "topic %q is listed more than once", t.Name)
	}
	if err := metadata.ValidateTopicName(t.Name); err != nil {
		return nil, err
	}
	nt := &pb.NewTopic{Name: t.Name, Id: newTopicID(), Seed: randomSeed(), Configs: t.Configs}
	if len(t.Assignments) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, kafkaErrorf(kerr.InvalidRequest,
				"topic %q: with replica assignments, the partition count and replication factor must be -1", t.Name)
		}
		nt.Assignments = t.Assignments
	} else {
		nt.NumPartitions, nt.ReplicationFactor = t.NumPartitions, t.ReplicationFactor
		if nt.NumPartitions == -1 {
			nt.NumPartitions = v.s.cfg.DefaultPartitions
		}
		if nt.ReplicationFactor == -1 {
			nt.ReplicationFactor = int32(v.s.cfg.DefaultReplicationFactor)
		}
	}
	if err := topicconfig.Validate(t.Configs); err != nil {
		return nil, err
	}
	return nt, nil
}

func (v *service) DeleteTopics(ctx context.Context, req *pb.DeleteTopicsRequest) (*pb.DeleteTopicsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	resp := &pb.DeleteTopicsResponse{Errors: make([]*pb.Error, len(req.Names))}
	counts := map[string]int{}
	for _, n := range req.Names {
		counts[n]++
	}
	im := v.s.fsm.image()
	rec := &pb.DeleteTopicsRecord{}
	var positions []int
	for i, name := range req.Names {
		t := im.Topics[name]
		switch {
		case counts[name] > 1:
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.InvalidRequest, "topic %q is listed more than once", name))
		case t == nil:
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", name))
		default:
			rec.Topics = append(rec.Topics, &pb.TopicRef{Name: name, Id: t.ID[:]})
			positions = append(positions, i)
		}
	}
	if len(rec.Topics) == 0 {
		return resp, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_DeleteTopics{DeleteTopics: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	errs, _ := res.value.([]error)
	for j, pos := range positions {
		if j < len(errs) && errs[j] != nil {
			resp.Errors[pos] = toPBError(errs[j])
		} else {
			v.s.log.Info("topic deleted", "topic", req.Names[pos])
		}
	}
	return resp, nil
}

func (v *service) CreatePartitions(ctx context.Context, req *pb.CreatePartitionsRequest) (*pb.CreatePartitionsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	resp := &pb.CreatePartitionsResponse{Errors: make([]*pb.Error, len(req.Specs))}
	counts := map[string]int{}
	for _, sp := range req.Specs {
		counts[sp.Topic]++
	}
	im := v.s.fsm.image()
	rec := &pb.CreatePartitionsRecord{}
	var positions []int
	for i, sp := range req.Specs {
		t := im.Topics[sp.Topic]
		switch {
		case counts[sp.Topic] > 1:
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.InvalidRequest, "topic %q is listed more than once", sp.Topic))
		case t == nil:
			resp.Errors[i] = toPBError(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", sp.Topic))
		default:
			rec.Specs = append(rec.Specs, &pb.NewPartitions{Topic: sp.Topic, TopicId: t.ID[:], Count: sp.Count,
				Assignments: sp.Assignments, Seed: randomSeed()})
			positions = append(positions, i)
		}
	}
	if len(rec.Specs) == 0 {
		return resp, nil
	}
	full := &pb.Record{Record: &pb.Record_CreatePartitions{CreatePartitions: rec}}
	res, err := v.applyOrValidate(ctx, full, req.ValidateOnly)
	if err != nil {
		return nil, err
	}
	errs, _ := res.value.([]error)
	for j, pos := range positions {
		if j < len(errs) {
			resp.Errors[pos] = toPBError(errs[j])
		}
	}
	return resp, nil
}

func (v *service) AlterTopicConfigs(ctx context.Context, req *pb.AlterTopicConfigsRequest) (*pb.AlterTopicConfigsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	v.s.adminMu.Lock()
	defer v.s.adminMu.Unlock()
	fail := func(err error) (*pb.AlterTopicConfigsResponse, error) {
		return &pb.AlterTopicConfigsResponse{Error: toPBError(err)}, nil
	}
	t := v.s.fsm.image().Topics[req.Topic]
	if t == nil {
		return fail(kafkaErrorf(kerr.UnknownTopicOrPartition, "topic %q does not exist", req.Topic))
	}
	ops := make([]metadata.ConfigOp, len(req.Ops))
	for i, op := range req.Ops {
		ops[i] = metadata.ConfigOp{Name: op.Name, Value: op.Value, Op: metadata.ConfigOpType(op.Op)}
	}
	cfg, err := metadata.ApplyConfigOps(t.Configs, ops, req.Incremental)
	if err != nil {
		return fail(err)
	}
	if err := topicconfig.Validate(cfg); err != nil {
		return fail(err)
	}
	if req.ValidateOnly {
		return &pb.AlterTopicConfigsResponse{}, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_SetTopicConfigs{SetTopicConfigs: &pb.SetTopicConfigsRecord{
		Topic: req.Topic, TopicId: t.ID[:], Configs: cfg}}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.AlterTopicConfigsResponse{Error: toPBError(res.err)}, nil
}

func (v *service) AlterPartition(ctx context.Context, req *pb.AlterPartitionRequest) (*pb.AlterPartitionResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	rec := &pb.Record{Record: &pb.Record_AlterPartition{AlterPartition: &pb.AlterPartitionRecord{
		BrokerId: req.BrokerId, BrokerEpoch: req.BrokerEpoch, Topic: req.Topic, Partition: req.Partition,
		LeaderEpoch: req.LeaderEpoch, PartitionEpoch: req.PartitionEpoch, NewIsr: req.NewIsr}}}
	// A stale request is answered without growing the log; the FSM checks again at apply.
	res := v.s.fsm.dryRun(rec)
	if res.err == nil {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.AlterPartitionResponse{Error: toPBError(res.err)}, nil
	}
	p := res.value.(alterPartitionResult).partition
	return &pb.AlterPartitionResponse{Partition: partitionToPB(&p)}, nil
}

func (v *service) AllocateProducerIds(ctx context.Context, req *pb.AllocateProducerIdsRequest) (*pb.AllocateProducerIdsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_AllocateProducerIds{AllocateProducerIds: &pb.AllocateProducerIdsRecord{
		BrokerId: req.BrokerId, BrokerEpoch: req.BrokerEpoch, Count: defaultProducerIDsPerCall}}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		return &pb.AllocateProducerIdsResponse{Error: toPBError(res.err)}, nil
	}
	b := res.value.(producerIDBlock)
	return &pb.AllocateProducerIdsResponse{FirstProducerId: b.first, Count: b.count}, nil
}

func validateCommit(group string, offsets []*pb.OffsetEntry) error {
	if group == "" {
		return kafkaErrorf(kerr.InvalidGroupID, "group id is empty")
	}
	// offset.metadata.max.bytes is the group coordinator's to apply, per partition; this
	// is only the quorum's sanity bound, which that setting may not exceed.
	for _, o := range offsets {
		if len(o.Metadata) > metadata.MaxOffsetMetadataBytes {
			return kafkaErrorf(kerr.OffsetMetadataTooLarge, "%s-%d: metadata of %d bytes exceeds the controller's bound of %d bytes",
				o.Topic, o.Partition, len(o.Metadata), metadata.MaxOffsetMetadataBytes)
		}
	}
	return nil
}

func (v *service) CommitOffsets(ctx context.Context, req *pb.CommitOffsetsRequest) (*pb.CommitOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := validateCommit(req.Group, req.Offsets); err != nil {
		return &pb.CommitOffsetsResponse{Error: toPBError(err)}, nil
	}
	now := time.Now().UnixMilli()
	for _, o := range req.Offsets {
		if o.CommitTimeMs == 0 {
			o.CommitTimeMs = now
		}
	}
	kafkaErr, err := v.outcome(v.s.committer.submit(ctx, &pb.OffsetOp{Group: req.Group, Commits: req.Offsets,
		Fenced: true, CoordinatorId: req.CoordinatorId, CoordinatorEpoch: req.CoordinatorEpoch}))
	if err != nil {
		return nil, err
	}
	return &pb.CommitOffsetsResponse{Error: kafkaErr}, nil
}

func topicFilter(all bool, tps []*pb.TopicPartitions) map[string][]int32 {
	if all {
		return nil
	}
	out := make(map[string][]int32, len(tps))
	for _, tp := range tps {
		out[tp.Topic] = append(out[tp.Topic], tp.Partitions...)
	}
	return out
}

func (v *service) FetchOffsets(ctx context.Context, req *pb.FetchOffsetsRequest) (*pb.FetchOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.FetchOffsetsResponse{}
	for _, o := range v.s.fsm.fetchOffsets(req.Group, topicFilter(req.AllTopics, req.Topics)) {
		resp.Offsets = append(resp.Offsets, offsetToPB(o))
	}
	return resp, nil
}

func offsetToPB(o metadata.CommittedOffset) *pb.OffsetEntry {
	e := &pb.OffsetEntry{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata}
	if !o.CommitTime.IsZero() {
		e.CommitTimeMs = o.CommitTime.UnixMilli()
	}
	if !o.ExpireTime.IsZero() {
		e.ExpireTimeMs = o.ExpireTime.UnixMilli()
	}
	return e
}

func (v *service) DeleteGroupOffsets(ctx context.Context, req *pb.DeleteGroupOffsetsRequest) (*pb.DeleteGroupOffsetsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if req.Group == "" {
		return &pb.DeleteGroupOffsetsResponse{Error: toPBError(kafkaErrorf(kerr.InvalidGroupID, "group id is empty"))}, nil
	}
	op := &pb.OffsetOp{Group: req.Group, Delete: true, DeleteAll: req.AllTopics, DeleteTopics: req.Topics,
		Fenced: true, CoordinatorId: req.CoordinatorId, CoordinatorEpoch: req.CoordinatorEpoch}
	kafkaErr, err := v.outcome(v.s.committer.submit(ctx, op))
	if err != nil {
		return nil, err
	}
	return &pb.DeleteGroupOffsetsResponse{Error: kafkaErr}, nil
}

// maxOffsetsLogWait bounds a ReadOffsetsLog long poll, whatever the broker asks.
const maxOffsetsLogWait = 30 * time.Second

func (v *service) ReadOffsetsLog(ctx context.Context, req *pb.ReadOffsetsLogRequest) (*pb.ReadOffsetsLogResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	wait := min(time.Duration(req.MaxWaitMs)*time.Millisecond, maxOffsetsLogWait)
	var timer <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timer = t.C
	}
	for {
		recs, end, changed, err := v.s.fsm.readOffsetsLog(req.Partition, req.FromOffset, int(req.MaxBytes))
		if err != nil {
			return &pb.ReadOffsetsLogResponse{Error: toPBError(err)}, nil
		}
		if len(recs) > 0 || timer == nil {
			resp := &pb.ReadOffsetsLogResponse{LogEnd: end, Records: make([]*pb.OffsetsLogRecord, len(recs))}
			for i, r := range recs {
				e := offsetToPB(r.Offset)
				e.LogOffset = r.LogOffset
				resp.Records[i] = &pb.OffsetsLogRecord{Group: r.Group, Tombstone: r.Tombstone, Offset: e}
			}
			return resp, nil
		}
		select {
		case <-changed:
		case <-timer:
			timer = nil // one last read
		case <-ctx.Done():
			return nil, v.rpcError(ctx.Err())
		case <-v.s.ctx.Done():
			return nil, v.rpcError(raft.ErrRaftShutdown)
		}
	}
}

func (v *service) ListOffsetGroups(ctx context.Context, _ *pb.ListOffsetGroupsRequest) (*pb.ListOffsetGroupsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.ListOffsetGroupsResponse{Groups: v.s.fsm.offsetGroups()}, nil
}

// applyOrValidate commits rec through Raft, or with validateOnly only runs it against a
// copy of the state, as CreateTopics and CreatePartitions' validate_only ask.
func (v *service) applyOrValidate(ctx context.Context, rec *pb.Record, validateOnly bool) (applyResult, error) {
	if validateOnly {
		return v.s.fsm.dryRun(rec), nil
	}
	res, _, err := v.s.propose(ctx, rec)
	if err != nil {
		return applyResult{}, v.rpcError(err)
	}
	return res, nil
}

func (v *service) ElectLeaders(ctx context.Context, req *pb.ElectLeadersRequest) (*pb.ElectLeadersResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	switch req.Type {
	case pb.ElectionType_ELECTION_TYPE_PREFERRED, pb.ElectionType_ELECTION_TYPE_UNCLEAN:
	default:
		return &pb.ElectLeadersResponse{Error: toPBError(kafkaErrorf(kerr.InvalidRequest, "unknown election type %d", req.Type))}, nil
	}
	rec := &pb.ElectLeadersRecord{Type: req.Type, AllPartitions: req.AllPartitions, Partitions: req.Partitions}
	// An election that would change nothing is answered without growing the log.
	full := &pb.Record{Record: &pb.Record_ElectLeaders{ElectLeaders: rec}}
	res := v.s.fsm.dryRun(full)
	if res.err == nil && electionWouldChange(res.value) {
		var err error
		if res, _, err = v.s.propose(ctx, full); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.ElectLeadersResponse{Error: toPBError(res.err)}, nil
	}
	results, _ := res.value.(electionResults)
	resp := &pb.ElectLeadersResponse{}
	elected := 0
	for _, topic := range slices.Sorted(maps.Keys(results)) {
		for _, idx := range slices.Sorted(maps.Keys(results[topic])) {
			err := results[topic][idx]
			if err == nil {
				elected++
			}
			resp.Results = append(resp.Results, &pb.PartitionError{Topic: topic, Partition: idx, Error: toPBError(err)})
		}
	}
	if elected > 0 {
		v.s.log.Info("leaders elected on request", "type", req.Type.String(), "partitions", elected)
	}
	return resp, nil
}

// electionWouldChange reports whether a dry run's results elect any partition.
func electionWouldChange(value any) bool {
	results, _ := value.(electionResults)
	for _, ps := range results {
		for _, err := range ps {
			if err == nil {
				return true
			}
		}
	}
	return false
}
