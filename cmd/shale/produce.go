package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/shalelog/shale/client"
	"github.com/twmb/franz-go/pkg/kgo"
)

func produceCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := newCommand("shale produce", "shale produce --topic T [flags] < lines",
		"Sends each line of stdin as one record's value (an empty line is an empty value),\nas kafka-console-producer.sh does. Stops at the end of input, or at the first\nrecord that fails, after waiting for the ones in flight.")
	var conn connFlags
	conn.register(c.fs)
	topic := c.fs.String("topic", "", "topic to write to")
	keySep := c.fs.String("key-separator", "", "split each line at the first `separator` into key and value\n(a line without it is an error); unset, records have no key")
	acks := c.fs.String("acks", "all", "what a write waits for: all (-1), 1 (the leader) or 0 (nothing)")
	compression := c.fs.String("compression", "none", "batch `codec`: none, gzip, snappy, lz4 or zstd")
	partition := c.fs.Int("partition", -1, "write every record to this `partition` (-1: hash the key,\nor spread keyless records)")
	var headers keyValues
	c.fs.Var(&headers, "header", "add header `key=value` to every record (repeatable)")
	timeout := 30 * time.Second
	c.fs.Var(durationValue{&timeout}, "timeout", "longest a record may wait for its acknowledgement (`duration`)")
	positional, code, ok := c.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	switch {
	case len(positional) > 0:
		return c.usageErr(stderr, "unexpected argument %q (records come from stdin)", positional[0])
	case *topic == "":
		return c.usageErr(stderr, "--topic is required")
	case *partition < -1 || *partition > 1<<31-1:
		return c.usageErr(stderr, "--partition %d: want a partition number, or -1", *partition)
	}
	o := conn.options()
	o.Acks, o.Compression, o.DeliveryTimeout = *acks, *compression, timeout
	o.ManualPartitions = *partition >= 0
	cl, err := client.New(o)
	if err != nil {
		return c.usageErr(stderr, "%v", err)
	}
	defer cl.Close()

	var hdrs []kgo.RecordHeader
	for _, k := range headers.order {
		hdrs = append(hdrs, kgo.RecordHeader{Key: k, Value: []byte(headers.m[k])})
	}
	// Records are not tied to ctx: on SIGINT the input stops, but what was read is still
	// delivered (bounded by --timeout), so nothing typed before the signal is dropped.
	produceCtx := context.WithoutCancel(ctx)
	async := cl.Async()
	lines, stopReading, readErr := readLines(ctx, stdin)
	defer stopReading()
	lineNo := 0
	var inputErr error
	for line := range lines {
		lineNo++
		r := &kgo.Record{Topic: *topic, Value: line, Headers: hdrs}
		if *partition >= 0 {
			r.Partition = int32(*partition)
		}
		if *keySep != "" {
			k, v, found := bytes.Cut(line, []byte(*keySep))
			if !found {
				inputErr = fmt.Errorf("line %d has no key separator %q", lineNo, *keySep)
				break
			}
			r.Key, r.Value = k, v
		}
		async.Produce(produceCtx, r)
		if async.Err() != nil {
			break
		}
	}
	stopReading()
	waitCtx, cancel := context.WithTimeout(produceCtx, timeout+5*time.Second)
	defer cancel()
	_, err = async.Wait(waitCtx)
	if inputErr == nil {
		inputErr = readErr()
	}
	if err = errors.Join(inputErr, err); err != nil {
		return failed(stderr, c.fs.Name(), err)
	}
	return exitOK
}

// readLines yields stdin's lines without their line ending (\n or \r\n) until the end
// of input, ctx's end or stop; readErr reports a read error once the input has ended.
// After stop the reading goroutine ends with its current read (at once for a pipe or
// file at its end; a terminal waits for its next line or the process's exit).
func readLines(ctx context.Context, r io.Reader) (lines <-chan []byte, stop func(), readErr func() error) {
	ch := make(chan []byte, 256)
	quit := make(chan struct{})
	done := make(chan struct{})
	var err error
	go func() {
		defer close(ch)   // runs last: a reader that sees ch closed also sees done
		defer close(done) // closed first, so err is settled before ch closes
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, rerr := br.ReadBytes('\n')
			if len(line) > 0 || rerr == nil {
				line = bytes.TrimSuffix(line, []byte("\n"))
				line = bytes.TrimSuffix(line, []byte("\r"))
				select {
				case ch <- line:
				case <-ctx.Done():
					return
				case <-quit:
					return
				}
			}
			if rerr != nil {
				if rerr != io.EOF {
					err = fmt.Errorf("reading stdin: %w", rerr)
				}
				return
			}
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { close(quit) }) }
	readErr = func() error {
		select {
		case <-done:
			return err
		default:
			return nil // stopped before the end of input
		}
	}
	return ch, stop, readErr
}
