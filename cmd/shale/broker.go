package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/shalelog/shale/client/rebalance"
)

const brokerUsage = `Usage: shale broker <drain|unregister> [flags]

  drain       --node N: move every replica off broker N (spreading them evenly over the
              other brokers, and over racks when brokers set broker.rack), wait until the
              reassignments complete, then elect preferred leaders; --dry-run prints
              the plan only
  unregister  --node N: remove broker N's registration once it is stopped (Kafka's
              UnregisterBroker); refused while it still holds replicas, so that scaling
              down never strands data, unless --force

Every subcommand takes --bootstrap-server host:port and, for secured listeners,
--command-config client.properties.
`

func brokerCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "broker", brokerUsage, map[string]subcommand{
		"drain": brokerDrain, "unregister": brokerUnregister,
	}, args, stdout, stderr)
}

func brokerDrain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale broker drain", "shale broker drain --node N [--dry-run] [flags]",
		"Moves every replica off a broker, before it is stopped and unregistered.")
	var nf nodeFlags
	nf.register(c, 30*time.Minute)
	dryRun := c.fs.Bool("dry-run", false, "print the plan without applying it")
	return nf.run(ctx, c, args, true, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		return planAndApply(opCtx, c, cl, rebalance.Options{Drain: []int32{int32(nf.node)}}, *dryRun, stdout, stderr)
	})
}

func brokerUnregister(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale broker unregister", "shale broker unregister --node N [--force] [flags]",
		"Removes a stopped broker's registration; refused while it holds replicas unless --force.")
	var nf nodeFlags
	nf.register(c, 30*time.Second)
	force := c.fs.Bool("force", false, "unregister even though the broker still holds replicas (their data there is lost to the cluster)")
	return nf.run(ctx, c, args, true, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if err := cl.UnregisterBroker(opCtx, int32(nf.node), *force); err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		fmt.Fprintf(stdout, "unregistered broker %d\n", nf.node)
		return exitOK
	})
}
