package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
	sharegroup "github.com/shalelog/shale/coordinator/share"
)

// describeShareGroups prints the groups among names that are share groups (KIP-932):
// members with their assignments, and per share partition the start offset, the lag and
// the record counts Shale's coordinator adds to DescribeShareGroupOffsets. It returns the
// groups it printed (or failed on) so that the caller describes the rest as consumer
// groups. A broker without share groups leaves every group to the caller.
func describeShareGroups(ctx context.Context, cl *client.Client, cmd string, names []string, stdout, stderr io.Writer) (map[string]bool, int) {
	done := map[string]bool{}
	described, err := cl.Admin().DescribeShareGroups(ctx, names...)
	if err != nil {
		var se *kadm.ShardErrors
		if !errors.As(err, &se) {
			return done, exitOK
		}
	}
	status := exitOK
	for _, g := range names {
		d, ok := described[g]
		if !ok || errors.Is(d.Err, kerr.GroupIDNotFound) {
			continue // not a share group
		}
		done[g] = true
		if d.Err != nil {
			fmt.Fprintf(stderr, "%s: group %s: %v\n", cmd, g, d.Err)
			status = exitFailed
			continue
		}
		fmt.Fprintf(stdout, "Share group %s: state %s, %s, epoch %d, assignor %s, coordinator %d\n\n",
			g, d.GroupState, plural(int64(len(d.Members)), "member"), d.GroupEpoch, d.Assignor, d.Coordinator.NodeID)
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONSUMER-ID\tHOST\tCLIENT-ID\tEPOCH\tASSIGNMENT")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.MemberID, m.ClientHost, m.ClientID, m.MemberEpoch, formatTopicsSet(m.Assignment))
		}
		tw.Flush()
		fmt.Fprintln(stdout)
		if err := printSharePartitions(ctx, cl, g, d, stdout); err != nil {
			fmt.Fprintf(stderr, "%s: group %s: share-partition state: %v\n", cmd, g, err)
			status = exitFailed
		}
		fmt.Fprintln(stdout)
	}
	return done, status
}

// printSharePartitions prints every share partition the group has state for or is
// assigned. Counts the coordinator did not send (another broker, or a partition without
// state) print as "-".
func printSharePartitions(ctx context.Context, cl *client.Client, g string, d kadm.DescribedShareGroup, stdout io.Writer) error {
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = g
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl.Kgo())
	if err != nil {
		return err
	}
	type row struct {
		start, lag string
		counts     *sharegroup.PartitionState
	}
	rows := map[string]map[int32]row{}
	for _, rg := range resp.Groups {
		if err := kerr.ErrorForCode(rg.ErrorCode); err != nil {
			return err
		}
		for _, rt := range rg.Topics {
			for _, rp := range rt.Partitions {
				r := row{start: "-", lag: "-"}
				if rp.StartOffset >= 0 {
					r.start = strconv.FormatInt(rp.StartOffset, 10)
				}
				if rp.Lag >= 0 {
					r.lag = strconv.FormatInt(rp.Lag, 10)
				}
				rp.UnknownTags.Each(func(tag uint32, b []byte) {
					var st sharegroup.PartitionState
					if tag == sharegroup.CountsTag && sharegroup.ParseCounts(b, &st) {
						r.counts = &st
					}
				})
				if rows[rt.Topic] == nil {
					rows[rt.Topic] = map[int32]row{}
				}
				rows[rt.Topic][rp.Partition] = r
			}
		}
	}
	for t, ps := range d.AssignedPartitions() {
		for p := range ps {
			if rows[t] == nil {
				rows[t] = map[int32]row{}
			}
			if _, ok := rows[t][p]; !ok {
				rows[t][p] = row{start: "-", lag: "-"}
			}
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTART-OFFSET\tLAG\tIN-FLIGHT\tACQUIRED\tACKNOWLEDGED\tARCHIVED")
	for _, t := range slices.Sorted(maps.Keys(rows)) {
		for _, p := range slices.Sorted(maps.Keys(rows[t])) {
			r := rows[t][p]
			counts := "-\t-\t-\t-"
			if c := r.counts; c != nil {
				counts = fmt.Sprintf("%d\t%d\t%d\t%d", c.InFlight, c.Acquired, c.Acknowledged, c.Archived)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", t, p, r.start, r.lag, counts)
		}
	}
	return tw.Flush()
}

// formatTopicsSet is "t[0,1] u[2]", or "-" for nothing.
func formatTopicsSet(s kadm.TopicsSet) string {
	if len(s) == 0 {
		return "-"
	}
	var parts []string
	for _, t := range slices.Sorted(maps.Keys(s)) {
		ps := slices.Collect(maps.Keys(s[t]))
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		nums := make([]string, len(ps))
		for i, p := range ps {
			nums[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, t+"["+strings.Join(nums, ",")+"]")
	}
	return strings.Join(parts, " ")
}

// isShareGroup reports whether g is a share group the cluster knows; false when it is
// not, or when the brokers have no share groups.
func isShareGroup(ctx context.Context, adm *kadm.Client, g string) bool {
	ds, err := adm.DescribeShareGroups(ctx, g)
	if err != nil {
		return false
	}
	d, ok := ds[g]
	return ok && d.Err == nil
}
