package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/shalelog/shale/client"
)

const controllerUsage = `Usage: shale controller <add|remove|list> [flags]

  add     --node N --address host:port: add controller N to the quorum. Start it first
          with node.id=N and controller.quorum.voters naming the running quorum (not
          itself): it then waits to be added instead of forming a quorum of its own. It
          catches up as a non-voter, then becomes a voter.
  remove  --node N: remove controller N from the quorum; it stops serving
  list    the quorum (DescribeQuorum): leader, epoch, high watermark, each voter's log
          end and last fetch, and the observers (controllers being added, brokers)

One change at a time: a change is refused while the previous one is not committed.
Every subcommand takes --bootstrap-server host:port (any broker forwards to the quorum)
and, for secured listeners, --command-config client.properties.
`

func controllerCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "controller", controllerUsage, map[string]subcommand{
		"add": controllerAdd, "remove": controllerRemove, "list": controllerList,
	}, args, stdout, stderr)
}

// nodeFlags are the flags of a command acting on one node.
type nodeFlags struct {
	clientFlags
	node int
}

func (nf *nodeFlags) register(c *command, timeout time.Duration) {
	nf.clientFlags.register(c.fs, timeout)
	c.fs.IntVar(&nf.node, "node", -1, "the node `id`")
}

// run parses flags and runs op with a client; needNode requires --node.
func (nf *nodeFlags) run(ctx context.Context, c *command, args []string, needNode bool, stdout, stderr io.Writer, op func(opCtx context.Context, cl *client.Client) int) int {
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(positional) > 0:
		return c.usageErr(stderr, "unexpected arguments %q", positional)
	case needNode && nf.node < 0:
		return c.usageErr(stderr, "name the node with --node")
	}
	return nf.withClient(ctx, c, stderr, op)
}

func controllerAdd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale controller add", "shale controller add --node N --address host:port [flags]",
		"Adds a running controller, started outside controller.quorum.voters, to the quorum.")
	var nf nodeFlags
	nf.register(c, 90*time.Second)
	addr := c.fs.String("address", "", "`host:port` of the new controller's CONTROLLER listener, as the other controllers reach it")
	return nf.run(ctx, c, args, true, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if *addr == "" {
			return c.usageErr(stderr, "give the controller's address with --address")
		}
		if err := cl.AddController(opCtx, int32(nf.node), *addr); err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		fmt.Fprintf(stdout, "added controller %d at %s to the quorum\n", nf.node, *addr)
		return exitOK
	})
}

func controllerRemove(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale controller remove", "shale controller remove --node N [flags]",
		"Removes a controller from the quorum; it stops serving.")
	var nf nodeFlags
	nf.register(c, 30*time.Second)
	return nf.run(ctx, c, args, true, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if err := cl.RemoveController(opCtx, int32(nf.node)); err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		fmt.Fprintf(stdout, "removed controller %d from the quorum\n", nf.node)
		return exitOK
	})
}

func controllerList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale controller list", "shale controller list [flags]",
		"Describes the controller quorum (Kafka's DescribeQuorum).")
	var nf nodeFlags
	nf.register(c, 30*time.Second)
	return nf.run(ctx, c, args, false, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		q, err := cl.DescribeQuorum(opCtx)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		fmt.Fprintf(stdout, "leader %d, epoch %d, high watermark %d\n\n", q.LeaderID, q.LeaderEpoch, q.HighWatermark)
		now := time.Now().UnixMilli()
		ago := func(ms int64) string {
			if ms < 0 {
				return "-"
			}
			return (time.Duration(max(now-ms, 0)) * time.Millisecond).Round(time.Millisecond).String() + " ago"
		}
		lag := func(leo int64) string {
			if leo < 0 {
				return "-"
			}
			return fmt.Sprint(max(q.HighWatermark-leo, 0))
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tROLE\tADDRESS\tLOG END\tLAG\tLAST FETCH\tLAST CAUGHT UP")
		for _, v := range q.Voters {
			role := "voter"
			if v.ID == q.LeaderID {
				role = "leader"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", v.ID, role, orDash(v.Addr), v.LogEndOffset, lag(v.LogEndOffset),
				ago(v.LastFetchTimestamp), ago(v.LastCaughtUpTimestamp))
		}
		for _, o := range q.Observers {
			fmt.Fprintf(tw, "%d\tobserver\t%s\t%d\t%s\t%s\t%s\n", o.ID, orDash(o.Addr), o.LogEndOffset, lag(o.LogEndOffset),
				ago(o.LastFetchTimestamp), ago(o.LastCaughtUpTimestamp))
		}
		tw.Flush()
		return exitOK
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
