package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	pb "github.com/shalelog/shale/controller/proto"
)

// offsetCommitter gathers the offset operations of concurrent callers into one Raft record
// (group commit): while one batch is being committed the next one fills up, so throughput
// is not bounded by one Raft round trip per commit. Operations keep their order: batches
// enter the Raft log in the order they are formed.
type offsetCommitter struct {
	s        *Server
	maxBatch int
	reqs     chan *offsetRequest
	// inflight bounds the batches committing at once; more would only shrink batches.
	inflight chan struct{}
}

const offsetBatchesInFlight = 2

type offsetRequest struct {
	op   *pb.OffsetOp
	done chan error // buffered
}

func newOffsetCommitter(s *Server, maxBatch int) *offsetCommitter {
	return &offsetCommitter{s: s, maxBatch: maxBatch, reqs: make(chan *offsetRequest, maxBatch),
		inflight: make(chan struct{}, offsetBatchesInFlight)}
}

// submit queues one operation and waits for its result.
func (c *offsetCommitter) submit(ctx context.Context, op *pb.OffsetOp) error {
	req := &offsetRequest{op: op, done: make(chan error, 1)}
	select {
	case c.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.s.ctx.Done():
		return raft.ErrRaftShutdown
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-c.s.ctx.Done():
		return raft.ErrRaftShutdown
	}
}

func (c *offsetCommitter) run(ctx context.Context) {
	for {
		var first *offsetRequest
		select {
		case first = <-c.reqs:
		case <-ctx.Done():
			c.failQueued(raft.ErrRaftShutdown)
			c.drainInflight()
			return
		}
		select {
		case c.inflight <- struct{}{}:
		case <-ctx.Done():
			first.done <- raft.ErrRaftShutdown
			c.failQueued(raft.ErrRaftShutdown)
			c.drainInflight()
			return
		}
		// Take whatever else is waiting now that a slot is free.
		batch := []*offsetRequest{first}
	gather:
		for len(batch) < c.maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		rec := &pb.OffsetOpsRecord{Ops: make([]*pb.OffsetOp, len(batch))}
		for i, r := range batch {
			rec.Ops[i] = r.op
		}
		fut, err := c.s.enqueue(&pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: rec}})
		if err != nil {
			<-c.inflight
			deliver(batch, nil, err)
			continue
		}
		go func() {
			defer func() { <-c.inflight }()
			res, _, err := c.s.waitApplied(ctx, fut)
			if err == nil && res.err != nil {
				err = res.err
			}
			var errs []error
			if err == nil {
				errs, _ = res.value.([]error)
			}
			deliver(batch, errs, err)
		}()
	}
}

func deliver(batch []*offsetRequest, errs []error, err error) {
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- err
		case i < len(errs):
			r.done <- errs[i]
		default:
			r.done <- errors.New("offset batch result missing")
		}
	}
}

func (c *offsetCommitter) failQueued(err error) {
	for {
		select {
		case r := <-c.reqs:
			r.done <- err
		default:
			return
		}
	}
}

// drainInflight waits for the batches still committing.
func (c *offsetCommitter) drainInflight() {
	for range offsetBatchesInFlight {
		c.inflight <- struct{}{}
	}
}

// commitUnbatched commits one operation as its own record, bypassing the committer; the
// benchmark compares the two.
func (s *Server) commitUnbatched(ctx context.Context, op *pb.OffsetOp) error {
	res, _, err := s.propose(ctx, &pb.Record{Record: &pb.Record_OffsetOps{OffsetOps: &pb.OffsetOpsRecord{Ops: []*pb.OffsetOp{op}}}})
	if err != nil {
		return err
	}
	if res.err != nil {
		return res.err
	}
	errs, _ := res.value.([]error)
	if len(errs) != 1 {
		return fmt.Errorf("offset result has %d entries", len(errs))
	}
	return errs[0]
}
