package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
)

const quotaUsage = `Usage: shale quota <set|remove|list> [flags]

  set     --user U and/or --client C, then key=value...: set client quotas
  remove  --user U and/or --client C, then key...: remove client quotas
  list    [--user U] [--client C]: print the quotas matching (all without flags)

Keys are Kafka's: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage
(percent of one handler thread), controller_mutation_rate. The name <default> means the
default entity (kafka-configs' --entity-default). Every subcommand takes
--bootstrap-server host:port (default localhost:9092).
`

// defaultEntity is how Kafka's tools print and name the default entity.
const defaultEntity = "<default>"

type quotaFlags struct {
	clientFlags
	user, clientID       string
	hasUser, hasClientID bool
}

func (qf *quotaFlags) register(c *command) {
	qf.clientFlags.register(c.fs, 30*time.Second)
	c.fs.Func("user", "the user `name` (<default> for the default user)", func(v string) error { qf.user, qf.hasUser = v, true; return nil })
	c.fs.Func("client", "the client `id` (<default> for the default client id), as kafka-configs' --client", func(v string) error {
		qf.clientID, qf.hasClientID = v, true
		return nil
	})
}

func quotaName(v string) *string {
	if v == defaultEntity {
		return nil
	}
	return &v
}

func (qf *quotaFlags) entity() kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	if qf.hasUser {
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "user", Name: quotaName(qf.user)})
	}
	if qf.hasClientID {
		e = append(e, kadm.ClientQuotaEntityComponent{Type: "client-id", Name: quotaName(qf.clientID)})
	}
	return e
}

func quotaCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "quota", quotaUsage, map[string]subcommand{
		"set": named("set", quotaAlter), "remove": named("remove", quotaAlter), "list": quotaList,
	}, args, stdout, stderr)
}

func quotaAlter(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	synopsis := "shale quota set (--user U | --client C)... key=value... [flags]"
	if sub == "remove" {
		synopsis = "shale quota remove (--user U | --client C)... key... [flags]"
	}
	c := newCommand("shale quota "+sub, synopsis, "Alters the client quotas of one entity (AlterClientQuotas).")
	var qf quotaFlags
	qf.register(c)
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if !qf.hasUser && !qf.hasClientID {
		return c.usageErr(stderr, "name the entity with --user, --client or both")
	}
	if len(positional) == 0 {
		return c.usageErr(stderr, "give at least one quota")
	}
	var ops []kadm.AlterClientQuotaOp
	for _, p := range positional {
		if sub == "remove" {
			ops = append(ops, kadm.AlterClientQuotaOp{Key: p, Remove: true})
			continue
		}
		k, v, found := strings.Cut(p, "=")
		f, err := strconv.ParseFloat(v, 64)
		if !found || err != nil {
			return c.usageErr(stderr, "quota %q is not key=number", p)
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: f})
	}
	return qf.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		res, err := cl.Admin().AlterClientQuotas(opCtx, []kadm.AlterClientQuotaEntry{{Entity: qf.entity(), Ops: ops}})
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		for _, r := range res {
			if r.Err != nil {
				return failed(stderr, c.fs.Name(), r.Err)
			}
		}
		return exitOK
	})
}

func quotaList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale quota list", "shale quota list [--user U] [--client C] [flags]",
		"Prints the client quotas of every entity that has the given user and client id.")
	var qf quotaFlags
	qf.register(c)
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	var filter []kadm.DescribeClientQuotaComponent
	add := func(typ, v string, set bool) {
		if !set {
			return
		}
		fc := kadm.DescribeClientQuotaComponent{Type: typ, MatchType: kmsg.QuotasMatchTypeExact, MatchName: quotaName(v)}
		if fc.MatchName == nil {
			fc.MatchType = kmsg.QuotasMatchTypeDefault
		}
		filter = append(filter, fc)
	}
	add("user", qf.user, qf.hasUser)
	add("client-id", qf.clientID, qf.hasClientID)
	return qf.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		described, err := cl.Admin().DescribeClientQuotas(opCtx, false, filter)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENTITY\tKEY\tVALUE")
		for _, d := range described {
			var parts []string
			for _, p := range d.Entity {
				name := defaultEntity
				if p.Name != nil {
					name = *p.Name
				}
				parts = append(parts, p.Type+"="+name)
			}
			for _, v := range d.Values {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.Join(parts, ","), v.Key, strconv.FormatFloat(v.Value, 'f', -1, 64))
			}
		}
		tw.Flush()
		return exitOK
	})
}
