package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/client"
)

const groupUsage = `Usage: shale group <list|describe|delete|reset-offsets|config> [flags]

  list           every group (consumer and share groups), with its type and state
  describe       --group G...: members, assignments, committed offset, log end offset and lag;
                 for a share group, each share partition's start offset, lag and in-flight,
                 acquired, acknowledged and archived records
  delete         --group G...: delete empty groups and their committed offsets
  reset-offsets  --group G --topic T (--to-earliest | --to-latest | --to-offset N) [--execute]
                 [--share]: a share group's start offsets (found by itself when it exists)
  config         --group G [--set key=value]... [--delete key]...: print or change the
                 group's configs (share.auto.offset.reset, consumer.session.timeout.ms, ...)

Every subcommand takes --bootstrap-server host:port (default localhost:9092).
reset-offsets prints the plan and changes nothing unless --execute is given; like
Kafka's kafka-consumer-groups, it needs the group to have no active members.
`

type groupFlags struct{ adminFlags }

func (gf *groupFlags) register(c *command) {
	gf.adminFlags.register(c, "group", "group `id` (repeatable)")
}

func groupCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "group", groupUsage, map[string]subcommand{
		"list": groupList, "describe": groupDescribe, "delete": groupDelete, "reset-offsets": groupResetOffsets,
		"config": groupConfig,
	}, args, stdout, stderr)
}

func groupList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale group list", "shale group list [flags]", "Prints every group, consumer and share groups, with its type, state and coordinator.")
	var gf groupFlags
	gf.register(c)
	return gf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		listed, err := cl.Admin().ListGroups(opCtx)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTYPE\tSTATE\tPROTOCOL-TYPE\tCOORDINATOR")
		for _, g := range listed.Sorted() {
			typ := g.GroupType
			if typ == "" { // brokers before ListGroups v5 have only classic groups
				typ = "classic"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", g.Group, typ, g.State, g.ProtocolType, g.Coordinator)
		}
		tw.Flush()
		return exitOK
	})
}

func groupDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale group describe", "shale group describe --group G [flags]",
		"Prints each group's members and, per partition, the committed offset, the log end\noffset and the lag, as kafka-consumer-groups --describe does.")
	var gf groupFlags
	gf.register(c)
	return gf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(gf.names) == 0 {
			return c.usageErr(stderr, "name at least one group with --group")
		}
		shares, status := describeShareGroups(opCtx, cl, c.fs.Name(), gf.names, stdout, stderr)
		var classic []string
		for _, g := range gf.names {
			if !shares[g] {
				classic = append(classic, g)
			}
		}
		if len(classic) == 0 {
			return status
		}
		lags, err := cl.Admin().Lag(opCtx, classic...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		for _, g := range classic {
			l, ok := lags[g]
			if !ok {
				fmt.Fprintf(stderr, "%s: group %s: no answer\n", c.fs.Name(), g)
				status = exitFailed
				continue
			}
			if err := l.Error(); err != nil {
				fmt.Fprintf(stderr, "%s: group %s: %v\n", c.fs.Name(), g, err)
				status = exitFailed
				continue
			}
			// A coordinator answers Dead for a group it does not know, with no error code.
			if l.State == "Dead" {
				fmt.Fprintf(stderr, "%s: Consumer group '%s' does not exist.\n", c.fs.Name(), g)
				status = exitFailed
				continue
			}
			header := "Group " + g + ": state " + l.State
			if l.Protocol != "" { // empty while the group has no members
				header += ", protocol " + l.Protocol
			}
			fmt.Fprintf(stdout, "%s, %s, coordinator %d\n\n", header, plural(int64(len(l.Members)), "member"), l.Coordinator.NodeID)
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT-OFFSET\tLOG-END-OFFSET\tLAG\tCONSUMER-ID\tHOST\tCLIENT-ID")
			for _, ml := range l.Lag.Sorted() {
				cur, lag := "-", "-"
				if ml.Commit.At >= 0 {
					cur = strconv.FormatInt(ml.Commit.At, 10)
				}
				if ml.Lag >= 0 {
					lag = strconv.FormatInt(ml.Lag, 10)
				}
				member, host, clientID := "-", "-", "-"
				if ml.Member != nil {
					member, host, clientID = ml.Member.MemberID, ml.Member.ClientHost, ml.Member.ClientID
				}
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", ml.Topic, ml.Partition, cur, ml.End.Offset, lag, member, host, clientID)
			}
			tw.Flush()
			fmt.Fprintf(stdout, "\nTotal lag: %d\n\n", l.Lag.Total())
		}
		return status
	})
}

func groupDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale group delete", "shale group delete --group G [flags]", "Deletes empty groups and their committed offsets.")
	var gf groupFlags
	gf.register(c)
	return gf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(gf.names) == 0 {
			return c.usageErr(stderr, "name at least one group with --group")
		}
		resps, err := cl.Admin().DeleteGroups(opCtx, gf.names...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		status := exitOK
		for _, g := range gf.names {
			if r, ok := resps[g]; ok && r.Err != nil {
				fmt.Fprintf(stderr, "%s: group %s: %v\n", c.fs.Name(), g, r.Err)
				status = exitFailed
				continue
			}
			fmt.Fprintf(stdout, "Deleted group %s.\n", g)
		}
		return status
	})
}

func groupResetOffsets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale group reset-offsets", "shale group reset-offsets --group G --topic T (--to-earliest | --to-latest | --to-offset N) [--execute]",
		"Sets a group's committed offsets for every partition of the topics. Without --execute\nit only prints the plan. The group must have no active members.")
	var gf groupFlags
	gf.register(c)
	var topics names
	c.fs.Var(&topics, "topic", "topic `name` (repeatable)")
	earliest := c.fs.Bool("to-earliest", false, "reset to each partition's log start offset")
	latest := c.fs.Bool("to-latest", false, "reset to each partition's log end offset")
	toOffset := c.fs.Int64("to-offset", -1, "reset every partition to this `offset` (clamped into the log's range)")
	execute := c.fs.Bool("execute", false, "apply the plan (default: only print it)")
	shareGroup := c.fs.Bool("share", false, "reset a share group's start offsets even if the group does not exist yet (an existing share group is found by itself)")
	return gf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		modes := 0
		for _, b := range []bool{*earliest, *latest, *toOffset >= 0} {
			if b {
				modes++
			}
		}
		switch {
		case len(gf.names) != 1:
			return c.usageErr(stderr, "name exactly one group with --group")
		case len(topics) == 0:
			return c.usageErr(stderr, "name at least one topic with --topic")
		case modes != 1:
			return c.usageErr(stderr, "give exactly one of --to-earliest, --to-latest, --to-offset N")
		}
		adm := cl.Admin()
		starts, err := adm.ListStartOffsets(opCtx, topics...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		ends, err := adm.ListEndOffsets(opCtx, topics...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		for _, l := range []kadm.ListedOffsets{starts, ends} {
			if err := listedError(l); err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
		}
		plan := kadm.Offsets{}
		ends.Each(func(e kadm.ListedOffset) {
			s, _ := starts.Lookup(e.Topic, e.Partition)
			at := e.Offset
			switch {
			case *earliest:
				at = s.Offset
			case *toOffset >= 0:
				// Clamped into the log, with the warning Kafka's kafka-consumer-groups prints:
				// a committed offset outside it would only be reset again by the consumer.
				at = min(max(*toOffset, s.Offset), e.Offset)
				switch {
				case *toOffset > e.Offset:
					fmt.Fprintf(stderr, "%s: warning: new offset (%d) is higher than the latest offset of %s-%d; it will be set to %d.\n",
						c.fs.Name(), *toOffset, e.Topic, e.Partition, at)
				case *toOffset < s.Offset:
					fmt.Fprintf(stderr, "%s: warning: new offset (%d) is lower than the earliest offset of %s-%d; it will be set to %d.\n",
						c.fs.Name(), *toOffset, e.Topic, e.Partition, at)
				}
			}
			plan.Add(kadm.Offset{Topic: e.Topic, Partition: e.Partition, At: at, LeaderEpoch: -1})
		})
		var rows []kadm.Offset
		plan.Each(func(o kadm.Offset) { rows = append(rows, o) })
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].Topic != rows[j].Topic {
				return rows[i].Topic < rows[j].Topic
			}
			return rows[i].Partition < rows[j].Partition
		})
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tTOPIC\tPARTITION\tNEW-OFFSET")
		for _, o := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", gf.names[0], o.Topic, o.Partition, o.At)
		}
		tw.Flush()
		if !*execute {
			fmt.Fprintln(stdout, "\nDry run: nothing changed. Add --execute to apply.")
			return exitOK
		}
		if *shareGroup || isShareGroup(opCtx, adm, gf.names[0]) {
			resps, err := adm.AlterShareGroupOffsets(opCtx, gf.names[0], plan)
			if err == nil {
				err = resps.Error()
			}
			if err != nil {
				return failed(stderr, c.fs.Name(), fmt.Errorf("%w (a share group with active members cannot be reset; stop its consumers first)", err))
			}
			fmt.Fprintln(stdout, "\nShare-partition start offsets reset.")
			return exitOK
		}
		resps, err := adm.CommitOffsets(opCtx, gf.names[0], plan)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		if err := resps.Error(); err != nil {
			return failed(stderr, c.fs.Name(), fmt.Errorf("%w (a group with active members cannot be reset; stop its consumers first)", err))
		}
		fmt.Fprintln(stdout, "\nOffsets reset.")
		return exitOK
	})
}

// listedError is the first error among listed offsets, naming its topic and partition.
func listedError(l kadm.ListedOffsets) error {
	var first error
	l.Each(func(o kadm.ListedOffset) {
		switch {
		case first != nil || o.Err == nil:
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition) && o.Partition < 0:
			first = fmt.Errorf("topic %s does not exist: %w", o.Topic, o.Err)
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
			first = fmt.Errorf("topic %s: %w", o.Topic, o.Err)
		default:
			first = fmt.Errorf("%s-%d: %w", o.Topic, o.Partition, o.Err)
		}
	})
	return first
}
