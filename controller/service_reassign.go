package controller

import (
	"context"
	"slices"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AlterPartitionReassignments(ctx context.Context, req *pb.AlterPartitionReassignmentsRequest) (*pb.AlterPartitionReassignmentsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	rec := &pb.Record{Record: &pb.Record_AlterPartitionReassignments{
		AlterPartitionReassignments: &pb.AlterPartitionReassignmentsRecord{Reassignments: req.Reassignments}}}
	// A request every entry of which fails changes nothing: answer it without growing
	// the log.
	res := v.s.fsm.dryRun(rec)
	if errs, _ := res.value.([]error); res.err == nil && slices.ContainsFunc(errs, func(err error) bool { return err == nil }) {
		var err error
		if res, _, err = v.s.propose(ctx, rec); err != nil {
			return nil, v.rpcError(err)
		}
	}
	if res.err != nil {
		return &pb.AlterPartitionReassignmentsResponse{Error: toPBError(res.err)}, nil
	}
	errs, _ := res.value.([]error)
	resp := &pb.AlterPartitionReassignmentsResponse{Results: make([]*pb.PartitionError, len(req.Reassignments))}
	started := 0
	for i, ra := range req.Reassignments {
		var err error
		if i < len(errs) {
			err = errs[i]
		}
		if err == nil {
			started++
		}
		resp.Results[i] = &pb.PartitionError{Topic: ra.Topic, Partition: ra.Partition, Error: toPBError(err)}
	}
	if started > 0 {
		v.s.log.Info("partition reassignments altered", "partitions", started)
	}
	return resp, nil
}
