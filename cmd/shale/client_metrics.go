package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
)

const clientMetricsUsage = `Usage: shale client-metrics <set|delete|list> [flags]

  set     --name N [--metrics P,...] [--interval MS] [--match k=regex,...]: create or
          change a client metrics subscription (KIP-714)
  delete  --name N: remove a subscription
  list    print every subscription and its configs

As kafka-client-metrics.sh: --metrics takes metric name prefixes (* for all), --interval
the push interval in milliseconds (100 to 3600000, default 300000), --match selectors
(client_instance_id, client_id, client_software_name, client_software_version,
client_source_address, client_source_port) whose regexes a client must all match. Every
subcommand takes --bootstrap-server host:port (default localhost:9092).
`

func clientMetricsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "client-metrics", clientMetricsUsage, map[string]subcommand{
		"set": named("set", clientMetricsAlter), "delete": named("delete", clientMetricsAlter), "list": clientMetricsList,
	}, args, stdout, stderr)
}

type clientMetricsFlags struct {
	clientFlags
	name string
}

func (f *clientMetricsFlags) register(c *command) {
	f.clientFlags.register(c.fs, 30*time.Second)
	c.fs.StringVar(&f.name, "name", "", "the subscription's `name`")
}

func clientMetricsAlter(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) int {
	synopsis := "shale client-metrics set --name N [--metrics P,...] [--interval MS] [--match k=regex,...] [flags]"
	if sub == "delete" {
		synopsis = "shale client-metrics delete --name N [flags]"
	}
	c := newCommand("shale client-metrics "+sub, synopsis, "Alters a client metrics subscription (IncrementalAlterConfigs on a CLIENT_METRICS resource).")
	var f clientMetricsFlags
	f.register(c)
	set := map[string]string{}
	if sub == "set" {
		c.fs.Func("metrics", "metric name `prefixes`, comma-separated (* for all)", func(v string) error { set["metrics"] = v; return nil })
		c.fs.Func("interval", "push interval in `milliseconds`", func(v string) error { set["interval.ms"] = v; return nil })
		c.fs.Func("match", "`selector=regex` pairs, comma-separated", func(v string) error { set["match"] = v; return nil })
	}
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if f.name == "" {
		return c.usageErr(stderr, "name the subscription with --name")
	}
	if sub == "set" && len(set) == 0 {
		return c.usageErr(stderr, "give at least one of --metrics, --interval, --match")
	}
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, f.name
	for _, k := range []string{"metrics", "interval.ms", "match"} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name = k
		if sub == "delete" {
			cfg.Op = kmsg.IncrementalAlterConfigOpDelete
		} else if v, ok := set[k]; ok {
			cfg.Value = kmsg.StringPtr(v)
		} else {
			continue
		}
		res.Configs = append(res.Configs, cfg)
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.Resources = append(req.Resources, res)
	return f.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		resp, err := req.RequestWith(opCtx, cl.Kgo())
		if err == nil && len(resp.Resources) == 1 {
			if err = kerr.ErrorForCode(resp.Resources[0].ErrorCode); err != nil && resp.Resources[0].ErrorMessage != nil {
				err = fmt.Errorf("%w: %s", err, *resp.Resources[0].ErrorMessage)
			}
		}
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		return exitOK
	})
}

func clientMetricsList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale client-metrics list", "shale client-metrics list [flags]",
		"Prints every client metrics subscription and its configs (ListClientMetricsResources, DescribeConfigs).")
	var f clientMetricsFlags
	f.register(c)
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	return f.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		listed, err := kmsg.NewPtrListConfigResourcesRequest().RequestWith(opCtx, cl.Kgo())
		if err == nil {
			err = kerr.ErrorForCode(listed.ErrorCode)
		}
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tMETRICS\tINTERVAL.MS\tMATCH")
		if len(listed.ConfigResources) > 0 {
			req := kmsg.NewPtrDescribeConfigsRequest()
			for _, r := range listed.ConfigResources {
				res := kmsg.NewDescribeConfigsRequestResource()
				res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeClientMetrics, r.Name
				req.Resources = append(req.Resources, res)
			}
			described, err := req.RequestWith(opCtx, cl.Kgo())
			if err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			sort.Slice(described.Resources, func(i, j int) bool { return described.Resources[i].ResourceName < described.Resources[j].ResourceName })
			for _, r := range described.Resources {
				if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
					return failed(stderr, c.fs.Name(), fmt.Errorf("%s: %w", r.ResourceName, err))
				}
				v := map[string]string{}
				for _, cfg := range r.Configs {
					if cfg.Value != nil {
						v[cfg.Name] = *cfg.Value
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ResourceName, orDash(v["metrics"]), orDash(v["interval.ms"]), orDash(v["match"]))
			}
		}
		tw.Flush()
		return exitOK
	})
}
