package controller

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/metadata/topicconfig"

	pb "github.com/shalelog/shale/controller/proto"
)

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
	id := t.Id
	if len(id) == 0 {
		id = newTopicID()
	}
	nt := &pb.NewTopic{Name: t.Name, Id: id, Seed: randomSeed(), Configs: t.Configs}
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
	if err := topicconfig.ValidateRemote(nil, t.Configs, v.s.cfg.TopicDefaults, v.s.cfg.RemoteLogStorageSystemEnable); err != nil {
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
	if err := topicconfig.ValidateRemote(t.Configs, cfg, v.s.cfg.TopicDefaults, v.s.cfg.RemoteLogStorageSystemEnable); err != nil {
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
