package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/client"
)

// groupConfig prints a group's configs (GROUP config resource, KIP-848/KIP-932), or
// changes them with --set and --delete (IncrementalAlterConfigs).
func groupConfig(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale group config", "shale group config --group G [--set key=value]... [--delete key]... [flags]",
		"Prints a group's configs (share.auto.offset.reset, share.record.lock.duration.ms, consumer.session.timeout.ms, ...), "+
			"or changes them with --set and --delete.")
	var f clientFlags
	f.register(c.fs, 30*time.Second)
	var group string
	c.fs.StringVar(&group, "group", "", "the group `id`")
	var ops []kmsg.IncrementalAlterConfigsRequestResourceConfig
	c.fs.Func("set", "set a config, `key=value` (repeatable)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value")
		}
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = k, kmsg.StringPtr(val)
		ops = append(ops, op)
		return nil
	})
	c.fs.Func("delete", "reset a config to the broker's value, `key` (repeatable)", func(v string) error {
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Op = v, kmsg.IncrementalAlterConfigOpDelete
		ops = append(ops, op)
		return nil
	})
	if _, code, ok := c.parse(args, stdout, stderr); !ok {
		return code
	}
	if group == "" {
		return c.usageErr(stderr, "name the group with --group")
	}
	return f.withClient(ctx, c, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(ops) > 0 {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType, res.ResourceName, res.Configs = kmsg.ConfigResourceTypeGroupConfig, group, ops
			req.Resources = append(req.Resources, res)
			resp, err := req.RequestWith(opCtx, cl.Kgo())
			if err == nil && len(resp.Resources) == 1 {
				err = resourceErr(resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
			}
			if err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			return exitOK
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
		req.Resources = append(req.Resources, res)
		resp, err := req.RequestWith(opCtx, cl.Kgo())
		if err == nil && len(resp.Resources) == 1 {
			err = resourceErr(resp.Resources[0].ErrorCode, resp.Resources[0].ErrorMessage)
		}
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
		for _, cfg := range resp.Resources[0].Configs {
			v := ""
			if cfg.Value != nil {
				v = *cfg.Value
			}
			source := "default"
			if cfg.Source == kmsg.ConfigSourceGroupConfig {
				source = "group"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cfg.Name, v, source)
		}
		tw.Flush()
		return exitOK
	})
}

func resourceErr(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err != nil && msg != nil {
		err = fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}
