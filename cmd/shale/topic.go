package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/shalelog/shale/client"
)

const topicUsage = `Usage: shale topic <create|list|describe|delete|alter|elect-leaders> [flags]

  create    --topic T [--partitions N] [--replication-factor R] [--config k=v]...
  list      [--exclude-internal]
  describe  [--topic T]... [--under-replicated-partitions] [--unavailable-partitions]
            [--rest-url URL] (every topic when none is named; --rest-url adds tiered
            partitions' remote log size)
  delete    --topic T...
  alter     --topic T [--add-config k=v]... [--delete-config k]... [--partitions N]
  elect-leaders  --election-type preferred|unclean (--topic T [--partition N] | --all-topic-partitions)

Every subcommand takes --bootstrap-server host:port (default localhost:9092).
Topic names may also be given as arguments. Run "shale topic <subcommand> --help".
`

// topicFlags are what every topic subcommand shares.
type topicFlags struct{ adminFlags }

func (tf *topicFlags) register(c *command) {
	tf.adminFlags.register(c, "topic", "topic `name` (repeatable)")
}

func topicCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return dispatch(ctx, "topic", topicUsage, map[string]subcommand{
		"create": topicCreate, "list": topicList, "describe": topicDescribe, "delete": topicDelete,
		"alter": topicAlter, "elect-leaders": topicElectLeaders,
	}, args, stdout, stderr)
}

func failed(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFailed
}

func topicCreate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic create", "shale topic create --topic T [flags]",
		"Creates a topic. Partitions and replication factor default to the broker's\nnum.partitions and default.replication.factor.")
	var tf topicFlags
	tf.register(c)
	partitions := c.fs.Int("partitions", -1, "number of partitions (-1: the broker's default)")
	rf := c.fs.Int("replication-factor", -1, "replicas per partition (-1: the broker's default)")
	var configs keyValues
	c.fs.Var(&configs, "config", "topic config `key=value` (repeatable), e.g. retention.ms=86400000")
	ifNotExists := c.fs.Bool("if-not-exists", false, "succeed when the topic already exists")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		switch {
		case len(tf.names) != 1:
			return c.usageErr(stderr, "name exactly one topic with --topic")
		case *partitions == 0 || *partitions < -1 || *partitions > 1<<31-1:
			return c.usageErr(stderr, "--partitions %d: want a positive count, or -1 for the broker's default", *partitions)
		case *rf == 0 || *rf < -1 || *rf > 1<<15-1:
			return c.usageErr(stderr, "--replication-factor %d: want a positive count, or -1 for the broker's default", *rf)
		}
		p, r, err := cl.CreateTopic(opCtx, client.TopicSpec{Name: tf.names[0], Partitions: int32(*partitions),
			ReplicationFactor: int16(*rf), Configs: configs.m})
		if err != nil {
			if *ifNotExists && errors.Is(err, kerr.TopicAlreadyExists) {
				return exitOK
			}
			return failed(stderr, c.fs.Name(), err)
		}
		if p > 0 {
			fmt.Fprintf(stdout, "Created topic %s with %s, replication factor %d.\n", tf.names[0], plural(int64(p), "partition"), r)
		} else {
			fmt.Fprintf(stdout, "Created topic %s.\n", tf.names[0])
		}
		return exitOK
	})
}

func topicList(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic list", "shale topic list [flags]", "Prints the cluster's topic names, one a line.")
	var tf topicFlags
	tf.register(c)
	excludeInternal := c.fs.Bool("exclude-internal", false, "leave out internal topics such as __consumer_offsets")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(tf.names) > 0 {
			return c.usageErr(stderr, "list takes no topic; use describe")
		}
		topics, err := cl.ListTopics(opCtx, !*excludeInternal)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		for _, t := range topics {
			fmt.Fprintln(stdout, t)
		}
		return exitOK
	})
}

func topicDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic describe", "shale topic describe [--topic T]... [flags]",
		"Prints topics' partitions (leader, replicas, in-sync replicas) and the configs\nset for them or by the broker, as kafka-topics.sh --describe does. For a topic with\nremote.storage.enable (tiered storage) each partition's line also has its log start,\nthe leader's local log start, the remote log's last offset, the log end, and the\nleader's local size in bytes (ListOffsets -2, -4, -5, -1 and DescribeLogDirs).\nWith --rest-url it also has the remote log's size in bytes and segments, which no\nKafka API carries: they come from a broker's REST proxy (rest.proxy.listener,\nGET .../topics/T/partitions/-/remote-log).")
	var tf topicFlags
	tf.register(c)
	var rf restFlags
	rf.registerAPI(c, "", "`URL` of a broker's REST proxy (rest.proxy.listener), for tiered partitions' remote log size")
	allConfigs := c.fs.Bool("all-configs", false, "print every config, defaults included")
	underReplicated := c.fs.Bool("under-replicated-partitions", false, "only partitions whose ISR is smaller than their replica set")
	unavailable := c.fs.Bool("unavailable-partitions", false, "only partitions without a leader, or whose leader is not a live broker")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		topics, err := cl.DescribeTopics(opCtx, tf.names...)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		// As in kafka-topics.sh, the filters print only the matching partitions' lines (either
		// filter matching), without the topics' header lines.
		filtered := *underReplicated || *unavailable
		status, hint := exitOK, false
		for _, t := range topics {
			if filtered {
				for _, p := range t.Partitions {
					if (*underReplicated && p.UnderReplicated()) || (*unavailable && p.Unavailable()) {
						printPartition(stdout, t.Name, p, "")
					}
				}
				continue
			}
			var configs []string
			for _, cfg := range t.Configs {
				if cfg.IsDefault() && !*allConfigs {
					continue
				}
				v := cfg.Value
				if cfg.Sensitive {
					v = "<sensitive>"
				}
				configs = append(configs, cfg.Name+"="+v)
			}
			fmt.Fprintf(stdout, "Topic: %s\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d\tConfigs: %s\n",
				t.Name, t.ID, len(t.Partitions), t.ReplicationFactor(), strings.Join(configs, ","))
			tiered := tieredColumns(opCtx, cl, t)
			if tiered != nil {
				if rf.url == "" {
					hint = true
				} else if err := remoteSizeColumns(opCtx, &rf, t, tiered); err != nil {
					fmt.Fprintf(stderr, "%s: remote log size of topic %s: %v\n", c.fs.Name(), t.Name, err)
					status = exitFailed
				}
			}
			for _, p := range t.Partitions {
				printPartition(stdout, t.Name, p, tiered[p.Partition])
			}
		}
		if hint {
			// Once, on stderr, so that the lines keep kafka-topics.sh's shape.
			fmt.Fprintf(stderr, "%s: for the remote log size of tiered partitions, add --rest-url URL (a broker's rest.proxy.listener)\n", c.fs.Name())
		}
		return status
	})
}

// remoteLogInfo is a partition's remote log as the REST proxy's remote-log resource
// answers it (server/restproxy/remotelog.go).
type remoteLogInfo struct {
	PartitionID   int32 `json:"partition_id"`
	SizeBytes     int64 `json:"size_bytes"`
	SegmentsCount int64 `json:"segments_count"`
}

// remoteSizeColumns appends to each tiered partition's columns the size of its remote
// log, in bytes and segments, as the REST proxy's broker sees it in its metadata image.
func remoteSizeColumns(ctx context.Context, rf *restFlags, t client.Topic, cols map[int32]string) error {
	var res struct {
		Data []remoteLogInfo `json:"data"`
	}
	if err := rf.call(ctx, http.MethodGet, "/topics/"+url.PathEscape(t.Name)+"/partitions/-/remote-log", nil, &res); err != nil {
		return err
	}
	for _, r := range res.Data {
		if _, ok := cols[r.PartitionID]; ok {
			cols[r.PartitionID] += fmt.Sprintf("\tRemoteSizeBytes: %d\tRemoteSegments: %d", r.SizeBytes, r.SegmentsCount)
		}
	}
	return nil
}

// tieredColumns are, for a topic with remote.storage.enable (tiered storage, KIP-405),
// the columns that say where each partition's records are: its log start, the leader's
// local log start (below it the records are in the remote log only), the remote log's
// last offset, the log end, and the leader's local size in bytes. Other topics get none.
func tieredColumns(ctx context.Context, cl *client.Client, t client.Topic) map[int32]string {
	on := false
	for _, cfg := range t.Configs {
		if cfg.Name == "remote.storage.enable" && strings.EqualFold(cfg.Value, "true") {
			on = true
		}
	}
	if !on {
		return nil
	}
	out := map[int32]string{}
	leaders := map[int32]int32{}
	for _, p := range t.Partitions {
		if p.Leader >= 0 {
			leaders[p.Partition] = p.Leader
		} else {
			out[p.Partition] = "\tTiered: no leader to ask"
		}
	}
	if len(leaders) == 0 {
		return out
	}
	tps, err := cl.TieredPartitions(ctx, t.Name, leaders)
	if err != nil {
		for p := range leaders {
			out[p] = fmt.Sprintf("\tTieredError: %v", err)
		}
		return out
	}
	for _, tp := range tps {
		if tp.Err != nil {
			out[tp.Partition] = fmt.Sprintf("\tTieredError: %v", tp.Err)
			continue
		}
		out[tp.Partition] = fmt.Sprintf("\tLogStartOffset: %d\tLocalLogStartOffset: %d\tHighestRemoteOffset: %d\tLogEndOffset: %d\tLocalSizeBytes: %d",
			tp.LogStart, tp.LocalLogStart, tp.HighestRemote, tp.LogEnd, tp.LocalSize)
	}
	return out
}

// printPartition prints a partition's line; extra are further columns.
func printPartition(w io.Writer, topic string, p client.Partition, extra string) {
	leader := "none"
	if p.Leader >= 0 {
		leader = strconv.Itoa(int(p.Leader))
	}
	fmt.Fprintf(w, "\tTopic: %s\tPartition: %d\tLeader: %s\tReplicas: %s\tIsr: %s", topic, p.Partition, leader, ids(p.Replicas), ids(p.ISR))
	if len(p.OfflineReplicas) > 0 {
		fmt.Fprintf(w, "\tOffline: %s", ids(p.OfflineReplicas))
	}
	if p.Err != nil {
		fmt.Fprintf(w, "\tError: %v", p.Err)
	}
	fmt.Fprintln(w, extra)
}

func ids(ns []int32) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(int(n))
	}
	return strings.Join(s, ",")
}

func topicDelete(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic delete", "shale topic delete --topic T... [flags]", "Deletes topics and all their records.")
	var tf topicFlags
	tf.register(c)
	ifExists := c.fs.Bool("if-exists", false, "succeed when a topic does not exist")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		if len(tf.names) == 0 {
			return c.usageErr(stderr, "name the topics to delete with --topic")
		}
		status := exitOK
		for _, t := range tf.names {
			err := cl.DeleteTopics(opCtx, t)
			switch {
			case err == nil:
				fmt.Fprintf(stdout, "Deleted topic %s.\n", t)
			case *ifExists && errors.Is(err, kerr.UnknownTopicOrPartition):
			default:
				status = failed(stderr, c.fs.Name(), err)
			}
		}
		return status
	})
}

func topicAlter(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic alter", "shale topic alter --topic T [--add-config k=v]... [--delete-config k]... [--partitions N]",
		"Changes a topic's configs incrementally (others are left as they are) and/or\nraises its partition count.")
	var tf topicFlags
	tf.register(c)
	var add keyValues
	var del names
	c.fs.Var(&add, "add-config", "set topic config `key=value` (repeatable)")
	c.fs.Var(&del, "delete-config", "return config `key` to its default (repeatable, or comma-separated)")
	partitions := c.fs.Int("partitions", 0, "raise the partition count to `N`")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		switch {
		case len(tf.names) != 1:
			return c.usageErr(stderr, "name exactly one topic with --topic")
		case len(add.m) == 0 && len(del) == 0 && *partitions == 0:
			return c.usageErr(stderr, "nothing to change: give --add-config, --delete-config or --partitions")
		case *partitions < 0:
			return c.usageErr(stderr, "--partitions %d is negative", *partitions)
		}
		topic := tf.names[0]
		if len(add.m) > 0 || len(del) > 0 {
			if err := cl.AlterTopicConfigs(opCtx, topic, add.m, del); err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			fmt.Fprintf(stdout, "Altered configs of topic %s.\n", topic)
		}
		if *partitions > 0 {
			if err := cl.SetPartitions(opCtx, topic, *partitions); err != nil {
				return failed(stderr, c.fs.Name(), err)
			}
			fmt.Fprintf(stdout, "Topic %s now has %s.\n", topic, plural(int64(*partitions), "partition"))
		}
		return exitOK
	})
}

func topicElectLeaders(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale topic elect-leaders",
		"shale topic elect-leaders --election-type preferred|unclean (--topic T [--partition N] | --all-topic-partitions) [flags]",
		"Elects partition leaders, as kafka-leader-election.sh does: preferred moves\nleadership to each partition's first replica when it is in sync; unclean gives a\nleaderless partition a leader even from outside the ISR, losing records.")
	var tf topicFlags
	tf.register(c)
	electionType := c.fs.String("election-type", "", "`preferred` or unclean")
	partition := c.fs.Int("partition", -1, "only partition `N` of the topic")
	all := c.fs.Bool("all-topic-partitions", false, "every partition of every topic")
	return tf.run(ctx, c, args, stdout, stderr, func(opCtx context.Context, cl *client.Client) int {
		var unclean bool
		switch strings.ToLower(*electionType) {
		case "preferred":
		case "unclean":
			unclean = true
		default:
			return c.usageErr(stderr, "--election-type %q: want preferred or unclean", *electionType)
		}
		var parts map[string][]int32
		switch {
		case *all && (len(tf.names) > 0 || *partition >= 0):
			return c.usageErr(stderr, "--all-topic-partitions takes neither --topic nor --partition")
		case *all:
		case len(tf.names) == 0:
			return c.usageErr(stderr, "name partitions with --topic (and --partition), or give --all-topic-partitions")
		case *partition >= 0 && len(tf.names) != 1:
			return c.usageErr(stderr, "--partition needs exactly one --topic")
		case *partition < -1 || *partition > 1<<31-1:
			return c.usageErr(stderr, "--partition %d is out of range", *partition)
		default:
			parts = map[string][]int32{}
			for _, t := range tf.names {
				parts[t] = []int32{} // every partition of the topic
				if *partition >= 0 {
					parts[t] = []int32{int32(*partition)}
				}
			}
		}
		results, err := cl.ElectLeaders(opCtx, unclean, parts)
		if err != nil {
			return failed(stderr, c.fs.Name(), err)
		}
		kind := strings.ToUpper(*electionType)
		var elected, notNeeded []string
		status := exitOK
		for _, r := range results {
			name := fmt.Sprintf("%s-%d", r.Topic, r.Partition)
			switch {
			case r.Err == nil:
				elected = append(elected, name)
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				notNeeded = append(notNeeded, name)
			default:
				fmt.Fprintf(stderr, "Error completing leader election (%s) for partition: %s: %v\n", kind, name, r.Err)
				status = exitFailed
			}
		}
		if len(elected) > 0 {
			fmt.Fprintf(stdout, "Successfully completed leader election (%s) for partitions %s\n", kind, strings.Join(elected, ", "))
		}
		if len(notNeeded) > 0 {
			fmt.Fprintf(stdout, "Valid replica already elected for partitions %s\n", strings.Join(notNeeded, ", "))
		}
		if len(results) == 0 {
			fmt.Fprintln(stdout, "No partition needed an election.")
		}
		return status
	})
}
