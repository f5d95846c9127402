package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/client/rebalance"
)

const clusterUsage = `Usage: shale cluster <rebalance> [flags]

  rebalance  plan moves that even out replicas and preferred leaders over the brokers
             (and spread partitions over racks when brokers set broker.rack), with the
             fewest replica moves; print the plan, apply it (AlterPartitionReassignments),
             wait until no reassignment is in progress, then elect preferred leaders.
             --dry-run prints the plan only.

Every subcommand takes --bootstrap-server host:port and, for secured listeners,
--command-config client.properties.
`

func clusterCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "cluster", clusterUsage, map[string]subcommand{"rebalance": clusterRebalance}, args, stdout, stderr)
}

func clusterRebalance(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale cluster rebalance", "shale cluster rebalance [--dry-run] [flags]",
		"Evens out replicas and preferred leaders over the brokers, moving as few replicas as it can.")
	var nf nodeFlags
	nf.register(c, 30*time.Minute)
	dryRun := c.fs.Bool("dry-run", false, "print the plan without applying it")
	return nf.run(ctx, c, args, false, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		return planAndApply(opCtx, c, cl, rebalance.Options{}, *dryRun, stdout, stderr)
	})
}

// planAndApply computes a plan from the cluster's assignment, prints it, and applies it
// unless dryRun.
func planAndApply(ctx context.Context, c *command, cl *client.Client, opts rebalance.Options, dryRun bool, stdout, stderr io.Writer) int {
	brokers, parts, err := cl.Assignment(ctx)
	if err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	for _, d := range opts.Drain {
		if !slices.ContainsFunc(brokers, func(b rebalance.Broker) bool { return b.ID == d }) {
			fmt.Fprintf(stderr, "%s: broker %d is not live and holds no replica\n", c.fs.Name(), d)
			return exitFailed
		}
	}
	plan, err := rebalance.Compute(brokers, parts, opts)
	if err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	printPlan(stdout, brokers, plan)
	if len(plan.Moves) == 0 || dryRun {
		return exitOK
	}
	err = cl.ApplyPlan(ctx, plan.Moves, func(s string) { fmt.Fprintln(stdout, s) })
	if err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	fmt.Fprintln(stdout, "done")
	return exitOK
}

func printPlan(w io.Writer, brokers []rebalance.Broker, plan rebalance.Plan) {
	if len(plan.Moves) == 0 {
		fmt.Fprintln(w, "The cluster is balanced: nothing to move.")
	} else {
		fmt.Fprintf(w, "Plan: %s, %s copied to a new broker.\n\n", plural(int64(len(plan.Moves)), "partition"),
			plural(int64(plan.ReplicaMoves), "replica"))
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PARTITION\tREPLICAS\tNEW REPLICAS")
		for _, m := range plan.Moves {
			fmt.Fprintf(tw, "%s-%d\t%s\t%s\n", m.Topic, m.Partition, "["+ids(m.From)+"]", "["+ids(m.To)+"]")
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	racks := map[int32]string{}
	for _, b := range brokers {
		racks[b.ID] = b.Rack
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BROKER\tRACK\tREPLICAS\tLEADERS")
	for _, b := range rebalance.Brokers(plan.ReplicasBefore, plan.ReplicasAfter, plan.LeadersAfter) {
		fmt.Fprintf(tw, "%d\t%s\t%d -> %d\t%d -> %d\n", b, orDash(racks[b]), plan.ReplicasBefore[b], plan.ReplicasAfter[b],
			plan.LeadersBefore[b], plan.LeadersAfter[b])
	}
	tw.Flush()
}
