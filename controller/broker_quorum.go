package controller

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/shalelog/shale/metadata"

	"github.com/twmb/franz-go/pkg/kerr"

	pb "github.com/shalelog/shale/controller/proto"
)

// The broker's side of quorum management (metadata.QuorumAdmin), and how it keeps
// following the quorum when its controllers change: every
// BrokerConfig.VoterRefreshInterval it asks the active controller for the current voters and
// dials those, so that a broker
// configured with controllers that were all swapped out since still reaches the quorum.

var _ metadata.QuorumAdmin = (*BrokerClient)(nil)

// DefaultVoterRefreshInterval is how often a broker refreshes the controllers it dials.
const DefaultVoterRefreshInterval = 5 * time.Second

func (c *BrokerClient) voterLoop() {
	every := c.cfg.VoterRefreshInterval
	if every <= 0 {
		every = DefaultVoterRefreshInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.ctx.Done():
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, max(every, c.cfg.RequestTimeout))
		st, err := c.DescribeQuorum(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Debug("could not refresh the controller quorum's voters", "err", err)
			}
			continue
		}
		var addrs []string
		for _, v := range st.Voters {
			if v.Addr != "" {
				addrs = append(addrs, v.Addr)
			}
		}
		if added, removed := c.q.setAddrs(addrs); len(added)+len(removed) > 0 {
			c.log.Info("controller quorum changed; dialling its current voters", "voters", addrs, "added", added, "removed", removed)
		}
	}
}

// setAddrs replaces the controllers dialled by addrs (when not empty), keeping the
// current one first when it is still a voter, and closes the connections to the others.
func (q *quorumConns) setAddrs(addrs []string) (added, removed []string) {
	if len(addrs) == 0 {
		return nil, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return nil, nil
	}
	for _, a := range addrs {
		if !slices.Contains(q.addrs, a) {
			added = append(added, a)
		}
	}
	for _, a := range q.addrs {
		if !slices.Contains(addrs, a) {
			removed = append(removed, a)
		}
	}
	if len(added)+len(removed) == 0 {
		return nil, nil
	}
	cur := q.addrs[q.leader]
	q.addrs = slices.Clone(addrs)
	q.leader = max(0, slices.Index(q.addrs, cur))
	for _, a := range removed {
		if cc := q.conns[a]; cc != nil {
			cc.Close()
			delete(q.conns, a)
		}
	}
	return added, removed
}

// Controllers returns the controller addresses the broker currently dials.
func (c *BrokerClient) Controllers() []string {
	c.q.mu.Lock()
	defer c.q.mu.Unlock()
	return slices.Clone(c.q.addrs)
}

// DescribeQuorum asks the active controller for the state of the quorum.
func (c *BrokerClient) DescribeQuorum(ctx context.Context) (metadata.QuorumState, error) {
	resp, err := rpc(ctx, c, pb.ControllerClient.DescribeQuorum, &pb.DescribeQuorumRequest{})
	if err != nil {
		return metadata.QuorumState{}, err
	}
	st := metadata.QuorumState{LeaderID: resp.LeaderId, LeaderEpoch: resp.LeaderEpoch, HighWatermark: resp.HighWatermark}
	conv := func(rs []*pb.QuorumReplica) []metadata.QuorumReplica {
		out := make([]metadata.QuorumReplica, len(rs))
		for i, r := range rs {
			out[i] = metadata.QuorumReplica{ID: r.Id, Addr: r.Address, LogEndOffset: r.LogEndOffset,
				LastFetch: msTime(r.LastFetchMs), LastCaughtUp: msTime(r.LastCaughtUpMs)}
		}
		return out
	}
	st.Voters, st.Observers = conv(resp.Voters), conv(resp.Observers)
	return st, nil
}

func msTime(ms int64) time.Time {
	if ms < 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// AddVoter adds a controller to the quorum. One attempt may last as long as the new
// controller takes to catch up.
func (c *BrokerClient) AddVoter(ctx context.Context, id int32, addr string) error {
	var resp *pb.AddVoterResponse
	failed := false
	err := c.q.call(ctx, defaultVoterCatchUpTimeout+c.cfg.RequestTimeout, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = cl.AddVoter(ctx, &pb.AddVoterRequest{VoterId: id, Address: addr})
		failed = failed || err != nil
		return err
	})
	if err != nil {
		return err
	}
	return retriedOutcome(fromPBError(resp.Error), failed, kerr.DuplicateVoter)
}

// RemoveVoter removes a controller from the quorum.
func (c *BrokerClient) RemoveVoter(ctx context.Context, id int32) error {
	var resp *pb.RemoveVoterResponse
	failed := false
	err := c.q.call(ctx, c.cfg.RequestTimeout, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = cl.RemoveVoter(ctx, &pb.RemoveVoterRequest{VoterId: id})
		failed = failed || err != nil
		return err
	})
	if err != nil {
		return err
	}
	return retriedOutcome(fromPBError(resp.Error), failed, kerr.VoterNotFound)
}

// UpdateVoter changes the address of voter id. A retried attempt that finds the address
// already set is a success: the controller answers it as a no-op.
func (c *BrokerClient) UpdateVoter(ctx context.Context, id int32, addr string) error {
	var resp *pb.UpdateVoterResponse
	err := c.q.call(ctx, c.cfg.RequestTimeout, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = cl.UpdateVoter(ctx, &pb.UpdateVoterRequest{VoterId: id, Address: addr})
		return err
	})
	if err != nil {
		return err
	}
	return fromPBError(resp.Error)
}

// retriedOutcome is the answer to a quorum change that this client may have retried.
// An attempt that failed (a lost answer, a timeout, a leader that stepped down while the
// change was being committed) may still have been applied, so when a later attempt is
// refused only because the quorum already is as asked (done: DUPLICATE_VOTER for an
// add, VOTER_NOT_FOUND for a remove), the change is reported as made: the retry is this
// client's own, and its caller asked for the state it found.
func retriedOutcome(err error, failedBefore bool, done *kerr.Error) error {
	if failedBefore && errors.Is(err, done) {
		return nil
	}
	return err
}
