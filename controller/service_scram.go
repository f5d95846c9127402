package controller

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

func (v *service) AlterScramCredentials(ctx context.Context, req *pb.AlterScramCredentialsRequest) (*pb.AlterScramCredentialsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	resp := &pb.AlterScramCredentialsResponse{
		DeletionErrors: make([]*pb.Error, len(req.Deletions)),
		UpsertErrors:   make([]*pb.Error, len(req.Upserts)),
	}
	// A deletion of a credential that does not exist fails alone, as in Kafka; it is
	// checked against the committed state before proposing.
	rec := &pb.ScramCredentialsRecord{Upserts: req.Upserts}
	existing := map[metadata.ScramCredentialKey]bool{}
	for _, c := range v.s.fsm.scramCredentials(nil) {
		existing[metadata.ScramCredentialKey{User: c.User, Mechanism: c.Mechanism}] = true
	}
	for i, d := range req.Deletions {
		if !existing[metadata.ScramCredentialKey{User: d.User, Mechanism: d.Mechanism}] {
			resp.DeletionErrors[i] = toPBError(kafkaErrorf(kerr.ResourceNotFound, "user %q has no %s credential", d.User, d.Mechanism))
			continue
		}
		rec.Deletions = append(rec.Deletions, d)
	}
	if len(rec.Deletions) == 0 && len(rec.Upserts) == 0 {
		return resp, nil
	}
	res, _, err := v.s.propose(ctx, &pb.Record{Record: &pb.Record_ScramCredentials{ScramCredentials: rec}})
	if err != nil {
		return nil, v.rpcError(err)
	}
	if res.err != nil {
		resp.Error = toPBError(res.err)
	}
	return resp, nil
}

func (v *service) DescribeScramCredentials(ctx context.Context, req *pb.DescribeScramCredentialsRequest) (*pb.DescribeScramCredentialsResponse, error) {
	if _, err := v.s.awaitSession(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	if err := v.s.verifyLeader(ctx); err != nil {
		return nil, v.rpcError(err)
	}
	return &pb.DescribeScramCredentialsResponse{Credentials: v.s.fsm.scramCredentials(req.Users)}, nil
}
