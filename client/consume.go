package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Start says where a consumer without committed offsets begins.
type Start int

const (
	// FromEnd starts after the last record: only new records (Kafka's default, latest).
	FromEnd Start = iota
	// FromBeginning starts at each partition's log start offset.
	FromBeginning
	// FromOffset starts at ConsumeOptions.Offset in each named partition. An offset
	// outside the log is an error rather than a silent reset.
	FromOffset
)

// ConsumeOptions says what to read.
type ConsumeOptions struct {
	Topics []string
	// Partitions restricts reading to these partitions of every topic (no group); nil
	// reads all partitions.
	Partitions []int32
	From       Start
	Offset     int64
	// Group, when set, consumes as a member of this consumer group: partitions are
	// assigned by the group, reading resumes from the group's committed offsets (From
	// applies only where there are none), and Commit records progress.
	Group string
	// FetchMaxWait is how long the broker may hold a fetch waiting for data (default:
	// franz-go's, 5s).
	FetchMaxWait time.Duration
}

// Consumer reads records.
type Consumer struct {
	kc     *kgo.Client
	group  string
	topics []string
}

// NewConsumer starts a consumer; o's produce settings are ignored.
func NewConsumer(o Options, co ConsumeOptions) (*Consumer, error) {
	opts, err := o.kgoOpts()
	if err != nil {
		return nil, err
	}
	copts, err := co.kgoOpts()
	if err != nil {
		return nil, err
	}
	kc, err := kgo.NewClient(append(opts, copts...)...)
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	return &Consumer{kc: kc, group: co.Group, topics: co.Topics}, nil
}

func (co ConsumeOptions) kgoOpts() ([]kgo.Opt, error) {
	if len(co.Topics) == 0 {
		return nil, errors.New("consume: no topic")
	}
	var start kgo.Offset
	switch co.From {
	case FromEnd:
		start = kgo.NewOffset().AtEnd()
	case FromBeginning:
		start = kgo.NewOffset().AtStart()
	case FromOffset:
		if co.Offset < 0 {
			return nil, fmt.Errorf("consume: offset %d is negative", co.Offset)
		}
		if len(co.Partitions) == 0 {
			return nil, errors.New("consume: starting at an offset needs the partitions to apply it to")
		}
		if co.Group != "" {
			return nil, errors.New("consume: a group starts from its committed offsets, not from a given offset")
		}
		start = kgo.NewOffset().At(co.Offset)
	default:
		return nil, fmt.Errorf("consume: unknown start %d", co.From)
	}
	var opts []kgo.Opt
	if co.FetchMaxWait > 0 {
		opts = append(opts, kgo.FetchMaxWait(co.FetchMaxWait))
	}
	switch {
	case co.Group != "" && len(co.Partitions) > 0:
		return nil, errors.New("consume: a group member is assigned its partitions; do not name them")
	case co.Group != "":
		// Only records handed to the caller are committed (Commit marks them), so stopping
		// after N records does not commit past the ones not yet seen.
		opts = append(opts, kgo.ConsumerGroup(co.Group), kgo.ConsumeTopics(co.Topics...),
			kgo.ConsumeResetOffset(start), kgo.AutoCommitMarks())
	case len(co.Partitions) > 0:
		parts := make(map[string]map[int32]kgo.Offset, len(co.Topics))
		for _, t := range co.Topics {
			parts[t] = make(map[int32]kgo.Offset, len(co.Partitions))
			for _, p := range co.Partitions {
				if p < 0 {
					return nil, fmt.Errorf("consume: partition %d is negative", p)
				}
				parts[t][p] = start
			}
		}
		opts = append(opts, kgo.ConsumePartitions(parts))
		if co.From == FromOffset {
			opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
		}
	default:
		opts = append(opts, kgo.ConsumeTopics(co.Topics...), kgo.ConsumeResetOffset(start))
	}
	return opts, nil
}

// Kgo is the underlying franz-go client.
func (c *Consumer) Kgo() *kgo.Client { return c.kc }

// Poll waits for records, at most max of them (max <= 0: whatever one fetch brings).
// It returns ctx's error when ctx ends before any record arrives, and any fetch error
// franz-go cannot retry (offset out of range, authorization, ...).
func (c *Consumer) Poll(ctx context.Context, max int) ([]*kgo.Record, error) {
	fs := c.kc.PollRecords(ctx, max)
	var errs []error
	for _, fe := range fs.Errors() {
		var loss *kgo.ErrDataLoss
		switch {
		case errors.As(fe.Err, &loss):
			// franz-go has already reset past it; the records that follow are real.
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded):
			errs = append(errs, fe.Err)
		case errors.Is(fe.Err, kgo.ErrClientClosed):
			errs = append(errs, fmt.Errorf("consume: %w", fe.Err))
		default:
			errs = append(errs, fmt.Errorf("consume %s[%d]: %w", fe.Topic, fe.Partition, fe.Err))
		}
	}
	recs := fs.Records()
	if len(recs) > 0 && ctx.Err() != nil {
		return recs, nil // records that arrived with the deadline still count
	}
	return recs, errors.Join(errs...)
}

// MissingTopics returns the consumer's topics that the cluster does not have, sorted. A
// consumer of such a topic would wait for records that cannot come; the question does
// not ask the broker to auto-create anything.
func (c *Consumer) MissingTopics(ctx context.Context) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, t := range c.topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return nil, fmt.Errorf("consume: look up topics: %w", err)
	}
	var missing []string
	for _, rt := range resp.Topics {
		if rt.Topic != nil && rt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
			missing = append(missing, *rt.Topic)
		}
	}
	slices.Sort(missing)
	return missing, nil
}

// Commit marks records as processed; for a group consumer their offsets are committed
// in the background and on Close. Without a group it does nothing.
func (c *Consumer) Commit(records ...*kgo.Record) {
	if c.group != "" {
		c.kc.MarkCommitRecords(records...)
	}
}

// EachOptions bound Each.
type EachOptions struct {
	// Max stops after this many records (0: no limit).
	Max int
	// Idle stops when no record arrives for this long (0: wait forever).
	Idle time.Duration
	// AfterPoll, when set, runs after each poll's records have gone to fn: the place to
	// flush buffered output.
	AfterPoll func() error
}

// Each hands records to fn one at a time until Max records, Idle time without records,
// ctx's end, or an error from a fetch or from fn; fn's records are committed (for a
// group) once it returns nil. It returns how many records fn accepted. Stopping on Max or
// Idle is not an error; ctx's end returns ctx's error.
func (c *Consumer) Each(ctx context.Context, eo EachOptions, fn func(*kgo.Record) error) (int, error) {
	n := 0
	for eo.Max <= 0 || n < eo.Max {
		pollCtx, cancel := ctx, context.CancelFunc(func() {})
		if eo.Idle > 0 {
			pollCtx, cancel = context.WithTimeout(ctx, eo.Idle)
		}
		max := 0
		if eo.Max > 0 {
			max = eo.Max - n
		}
		recs, err := c.Poll(pollCtx, max)
		cancel()
		for _, r := range recs {
			if err := fn(r); err != nil {
				return n, err
			}
			c.Commit(r)
			n++
		}
		if eo.AfterPoll != nil && len(recs) > 0 {
			if err := eo.AfterPoll(); err != nil {
				return n, err
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return n, ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) && pollCtx.Err() != nil {
				return n, nil // idle
			}
			return n, err
		}
	}
	return n, nil
}

// Close commits what Commit marked (for a group), leaves the group and closes the
// connections. The commit is bounded by ctx.
func (c *Consumer) Close(ctx context.Context) error {
	var err error
	if c.group != "" {
		if cerr := c.kc.CommitMarkedOffsets(ctx); cerr != nil {
			err = fmt.Errorf("consume: commit offsets of group %s: %w", c.group, cerr)
		}
	}
	c.kc.Close()
	return err
}
