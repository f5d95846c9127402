package controller

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	pb "github.com/shalelog/shale/controller/proto"
)

// controller.quorum.bootstrap.servers (KIP-853): where a controller finds the quorum's
// current voters when it starts. The voters it was configured with may be stale: since
// it was set up, controllers may have been added, removed or moved (AddRaftVoter,
// RemoveRaftVoter, UpdateRaftVoter). As in Kafka, the bootstrap servers take precedence:
// when one of them answers, its active controller's voters replace Config.Voters for
// every start-up decision (bootstrap a new quorum or join a running one, this
// controller's own address); when none answers within BootstrapTimeout (a quorum being
// formed for the first time), Config.Voters is used as before. A controller with Raft
// state keeps following the configuration stored in its log either way.

// DefaultBootstrapTimeout bounds how long a starting controller asks its bootstrap
// servers for the current voters before it falls back to its configured voters.
const DefaultBootstrapTimeout = 5 * time.Second

// discoverVoters asks the controllers at addrs (following leader hints) for the current
// voters, as the active controller's latest configuration lists them.
func discoverVoters(ctx context.Context, addrs []string, tlsCfg *tls.Config, attempt time.Duration) ([]Voter, error) {
	q := newQuorumConns(addrs, tlsCfg)
	defer q.close()
	var resp *pb.DescribeQuorumResponse
	err := q.call(ctx, attempt, func(ctx context.Context, cl pb.ControllerClient) (err error) {
		resp, err = cl.DescribeQuorum(ctx, &pb.DescribeQuorumRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	var voters []Voter
	for _, r := range resp.Voters {
		if r.Address == "" {
			return nil, fmt.Errorf("voter %d has no address in the quorum's answer", r.Id)
		}
		voters = append(voters, Voter{ID: r.Id, Addr: r.Address})
	}
	if len(voters) == 0 {
		return nil, fmt.Errorf("the quorum's answer lists no voters")
	}
	slices.SortFunc(voters, func(a, b Voter) int { return int(a.ID) - int(b.ID) })
	return voters, nil
}

// useBootstrapServers replaces cfg.Voters by the voters the bootstrap servers report,
// when they answer; see the comment at the top of this file.
func (s *Server) useBootstrapServers(ctx context.Context) {
	if len(s.cfg.BootstrapServers) == 0 {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.BootstrapTimeout)
	defer cancel()
	voters, err := discoverVoters(dctx, s.cfg.BootstrapServers, s.cfg.BootstrapTLS, s.cfg.BootstrapTimeout)
	if err != nil {
		s.log.Info("no answer from controller.quorum.bootstrap.servers; using controller.quorum.voters",
			"bootstrap_servers", s.cfg.BootstrapServers, "voters", FormatVoters(s.cfg.Voters), "err", err)
		return
	}
	if !slices.Equal(voters, s.cfg.Voters) {
		s.log.Info("the controller quorum's current voters differ from controller.quorum.voters; using the current ones",
			"current", FormatVoters(voters), "configured", FormatVoters(s.cfg.Voters))
	}
	s.cfg.Voters = voters
}
