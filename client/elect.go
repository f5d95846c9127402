package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ElectionResult is one partition's outcome of a leader election.
type ElectionResult struct {
	Topic     string
	Partition int32
	// Err is nil when a leader was elected, kerr.ElectionNotNeeded when the right replica
	// already leads, else why no leader could be elected.
	Err error
}

// ElectLeaders runs Kafka's ElectLeaders: a preferred-replica election, or with unclean
// an unclean one (a leaderless partition may take a replica outside the ISR, losing
// data). partitions maps topics to partitions, an empty list meaning all of the topic's;
// nil partitions means every partition of the cluster, and the broker then reports only
// the partitions an election was tried for. Results are sorted by topic and partition.
func (c *Client) ElectLeaders(ctx context.Context, unclean bool, partitions map[string][]int32) ([]ElectionResult, error) {
	how := kadm.ElectPreferredReplica
	if unclean {
		how = kadm.ElectLiveReplica
	}
	var set kadm.TopicsSet
	if partitions != nil {
		set = kadm.TopicsSet{}
		var whole []string
		for t, ps := range partitions {
			if len(ps) == 0 {
				whole = append(whole, t)
				continue
			}
			set.Add(t, ps...)
		}
		if len(whole) > 0 {
			topics, err := c.metadata(ctx, whole)
			if err != nil {
				return nil, fmt.Errorf("elect leaders: %w", err)
			}
			for _, t := range topics {
				for _, p := range t.Partitions {
					set.Add(t.Name, p.Partition)
				}
			}
		}
		if len(set) == 0 {
			return nil, errors.New("elect leaders: no partitions")
		}
	}
	rs, err := c.adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return nil, fmt.Errorf("elect leaders: %w", err)
	}
	var out []ElectionResult
	for _, t := range slices.Sorted(maps.Keys(rs)) {
		for _, p := range slices.Sorted(maps.Keys(rs[t])) {
			r := rs[t][p]
			err := r.Err
			if !errors.Is(err, kerr.ElectionNotNeeded) {
				err = withMessage(err, r.ErrMessage)
			}
			out = append(out, ElectionResult{Topic: t, Partition: p, Err: err})
		}
	}
	return out, nil
}
