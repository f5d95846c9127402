package client

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client/rebalance"
)

// Assignment reads the cluster's brokers (with their racks) and every partition's
// replicas, for the rebalance planner. A broker that holds replicas but is not live
// (restarting, say) is listed too, without a rack, so that a rebalance does not empty it;
// internal topics are left out.
func (c *Client) Assignment(ctx context.Context) ([]rebalance.Broker, []rebalance.Partition, error) {
	// During a reassignment a partition lists its old and new replicas together: a plan
	// made from that would be wrong.
	lreq := kmsg.NewPtrListPartitionReassignmentsRequest() // no topics: every reassignment
	lresp, err := lreq.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, nil, fmt.Errorf("list reassignments: %w", err)
	}
	if err := codeError(lresp.ErrorCode, lresp.ErrorMessage); err != nil {
		return nil, nil, fmt.Errorf("list reassignments: %w", err)
	}
	for _, t := range lresp.Topics {
		if len(t.Partitions) > 0 {
			return nil, nil, fmt.Errorf("%w: %s-%d is being reassigned; wait until reassignments complete",
				kerr.ReassignmentInProgress, t.Topic, t.Partitions[0].Partition)
		}
	}
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("read the assignment: %w", err)
	}
	var brokers []rebalance.Broker
	known := map[int32]bool{}
	for _, b := range md.Brokers {
		rb := rebalance.Broker{ID: b.NodeID}
		if b.Rack != nil {
			rb.Rack = *b.Rack
		}
		brokers = append(brokers, rb)
		known[b.NodeID] = true
	}
	var parts []rebalance.Partition
	for _, t := range md.Topics.Sorted() {
		if t.IsInternal {
			continue
		}
		if t.Err != nil {
			return nil, nil, fmt.Errorf("read the assignment: topic %s: %w", t.Topic, t.Err)
		}
		for _, p := range t.Partitions.Sorted() {
			parts = append(parts, rebalance.Partition{Topic: t.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)})
			for _, r := range p.Replicas {
				if !known[r] {
					known[r] = true
					brokers = append(brokers, rebalance.Broker{ID: r})
				}
			}
		}
	}
	slices.SortFunc(brokers, func(a, b rebalance.Broker) int { return int(a.ID) - int(b.ID) })
	return brokers, parts, nil
}

// ApplyPlan submits a plan's moves (AlterPartitionReassignments), waits until no
// reassignment of them is in progress (ListPartitionReassignments), then elects the
// preferred leaders of the moved partitions (ElectLeaders), so that leadership follows
// the new order. progress, when set, is told what happens.
func (c *Client) ApplyPlan(ctx context.Context, moves []rebalance.Move, progress func(string)) error {
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	if len(moves) == 0 {
		return nil
	}
	var req kadm.AlterPartitionAssignmentsReq
	set := kadm.TopicsSet{}
	for _, m := range moves {
		req.Assign(m.Topic, m.Partition, slices.Clone(m.To))
		set.Add(m.Topic, m.Partition)
	}
	resps, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return fmt.Errorf("reassign partitions: %w", err)
	}
	for _, r := range resps.Sorted() {
		if r.Err != nil {
			if r.ErrMessage != "" {
				return fmt.Errorf("reassign %s-%d: %w: %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
			}
			return fmt.Errorf("reassign %s-%d: %w", r.Topic, r.Partition, r.Err)
		}
	}
	say("submitted %d partition reassignments; waiting for them to complete", len(moves))
	start, last := time.Now(), -1
	for {
		inFlight, err := c.adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return fmt.Errorf("list reassignments: %w", err)
		}
		n := 0
		inFlight.Each(func(r kadm.ListPartitionReassignmentsResponse) {
			if len(r.AddingReplicas)+len(r.RemovingReplicas) > 0 {
				n++
			}
		})
		if n == 0 {
			break
		}
		if n != last {
			say("%d reassignments in progress (%v)", n, time.Since(start).Round(time.Second))
			last = n
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("wait for reassignments: %d still in progress: %w", n, ctx.Err())
		}
	}
	say("reassignments complete in %v; electing preferred leaders", time.Since(start).Round(time.Millisecond))
	partitions := map[string][]int32{}
	for _, m := range moves {
		partitions[m.Topic] = append(partitions[m.Topic], m.Partition)
	}
	results, err := c.ElectLeaders(ctx, false, partitions)
	if err != nil {
		return fmt.Errorf("elect preferred leaders: %w", err)
	}
	elected := 0
	for _, r := range results {
		if r.Err == nil {
			elected++
		}
	}
	say("preferred leaders elected for %d of %d moved partitions (the others needed no election)", elected, len(moves))
	return nil
}
