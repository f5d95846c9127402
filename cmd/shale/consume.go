package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/twmb/franz-go/pkg/kgo"
)

func consumeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("shale consume", "shale consume --topic T [flags]",
		"Prints each record's value on a line, as kafka-console-consumer.sh does, until\n--max-messages, --timeout without records, or Ctrl-C; then reports the count on\nstderr. Without --from-beginning or --offset it prints only new records.")
	var conn connFlags
	conn.register(c.fs)
	var topics names
	c.fs.Var(&topics, "topic", "topic to read (repeatable)")
	fromBeginning := c.fs.Bool("from-beginning", false, "start at the oldest record (for a group: where it has no committed offset)")
	offset := c.fs.String("offset", "", "start at this `offset` in --partition: a number, earliest or latest")
	partition := c.fs.Int("partition", -1, "read only this `partition` (-1: all)")
	maxMessages := c.fs.Int("max-messages", 0, "stop after `N` records (0: no limit)")
	var idle time.Duration
	c.fs.Var(durationValue{&idle}, "timeout", "stop when no record arrives for this `duration` (5s, or milliseconds)")
	printKey := c.fs.Bool("print-key", false, "print the key, then --key-separator, before the value")
	printHeaders := c.fs.Bool("print-headers", false, "print the headers (k:v,...) first")
	keySep := c.fs.String("key-separator", "\t", "`separator` printed after the key and headers")
	group := c.fs.String("group", "", "consume as a member of consumer group `G`, committing what is printed")
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(topics) == 0 && len(positional) == 1 {
		topics, positional = names{positional[0]}, nil
	}
	co := client.ConsumeOptions{Topics: topics, Group: *group}
	switch {
	case len(positional) > 0:
		return c.usageErr(stderr, "unexpected argument %q", positional[0])
	case len(topics) == 0:
		return c.usageErr(stderr, "--topic is required")
	case *maxMessages < 0:
		return c.usageErr(stderr, "--max-messages %d is negative", *maxMessages)
	case *partition < -1 || *partition > 1<<31-1:
		return c.usageErr(stderr, "--partition %d: want a partition number, or -1", *partition)
	case *group != "" && (*partition >= 0 || *offset != ""):
		return c.usageErr(stderr, "--group is assigned partitions and resumes from its commits: drop --partition and --offset")
	case *offset != "" && *partition < 0:
		return c.usageErr(stderr, "--offset needs --partition")
	case *offset != "" && *fromBeginning:
		return c.usageErr(stderr, "give --offset or --from-beginning, not both")
	}
	if *partition >= 0 {
		co.Partitions = []int32{int32(*partition)}
	}
	switch *offset {
	case "":
		if *fromBeginning {
			co.From = client.FromBeginning
		}
	case "earliest":
		co.From = client.FromBeginning
	case "latest":
		co.From = client.FromEnd
	default:
		n, err := strconv.ParseInt(*offset, 10, 64)
		if err != nil || n < 0 {
			return c.usageErr(stderr, "--offset %q: want a non-negative number, earliest or latest", *offset)
		}
		co.From, co.Offset = client.FromOffset, n
	}
	cons, err := client.NewConsumer(conn.options(), co)
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	if code, ok := checkTopicsExist(ctx, c.fs.Name(), cons, stderr); !ok {
		return code
	}

	out := bufio.NewWriterSize(stdout, 64<<10)
	sep := []byte(*keySep)
	n, err := cons.Each(ctx, client.EachOptions{Max: *maxMessages, Idle: idle, AfterPoll: out.Flush},
		func(r *kgo.Record) error {
			if *printHeaders {
				writeHeaders(out, r.Headers)
				out.Write(sep)
			}
			if *printKey {
				if r.Key == nil {
					out.WriteString("null")
				} else {
					out.Write(r.Key)
				}
				out.Write(sep)
			}
			out.Write(r.Value)
			return out.WriteByte('\n')
		})
	flushErr := out.Flush()
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	closeErr := cons.Close(closeCtx)
	fmt.Fprintf(stderr, "Processed a total of %d messages\n", n)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // Ctrl-C is how an open-ended consume ends
	}
	if err = errors.Join(err, flushErr, closeErr); err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	return exitOK
}

// writeHeaders prints headers as Kafka's console consumer does: k:v,k:v, or NO_HEADERS.
func writeHeaders(w *bufio.Writer, hs []kgo.RecordHeader) {
	if len(hs) == 0 {
		w.WriteString("NO_HEADERS")
		return
	}
	for i, h := range hs {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(h.Key)
		w.WriteByte(':')
		if h.Value == nil {
			w.WriteString("null")
		} else {
			w.Write(h.Value)
		}
	}
}

// checkTopicsExist fails the command when a topic to read does not exist: the consumer
// would otherwise wait out --timeout (or for ever) and report 0 messages, as if the topic
// were only empty.
func checkTopicsExist(ctx context.Context, name string, cons *client.Consumer, stderr io.Writer) (int, bool) {
	lookupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	missing, err := cons.MissingTopics(lookupCtx)
	if err == nil && len(missing) == 0 {
		return exitOK, true
	}
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancelClose()
	cons.Close(closeCtx)
	if err != nil {
		return failed(stderr, name, err), false
	}
	for _, t := range missing {
		fmt.Fprintf(stderr, "%s: topic %s does not exist\n", name, t)
	}
	return exitFailed, false
}
