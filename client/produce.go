package client

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Produce writes records and waits for every acknowledgement. Each record's Offset and
// Partition are filled on success. The error joins the distinct failures (with the
// count of records each failed), so one bad record does not hide another cause.
func (c *Client) Produce(ctx context.Context, records ...*kgo.Record) error {
	return summarize(c.kc.ProduceSync(ctx, records...))
}

func summarize(results kgo.ProduceResults) error {
	counts := map[string]int{}
	var order []error
	for _, r := range results {
		if r.Err == nil {
			continue
		}
		msg := r.Err.Error()
		if counts[msg] == 0 {
			order = append(order, r.Err)
		}
		counts[msg]++
	}
	var errs []error
	for _, err := range order {
		errs = append(errs, fmt.Errorf("produce (%d records): %w", counts[err.Error()], err))
	}
	return errors.Join(errs...)
}

// AsyncProducer sends records without waiting for each, keeping count of what was
// acknowledged and the first failure; Wait flushes and reports. It is what a
// line-by-line producer needs to keep many records in flight. Safe for concurrent use.
type AsyncProducer struct {
	kc *kgo.Client
	wg sync.WaitGroup

	mu     sync.Mutex
	acked  int64
	failed int64
	first  error
}

// Async starts an asynchronous producer on the client.
func (c *Client) Async() *AsyncProducer { return &AsyncProducer{kc: c.kc} }

// Produce buffers a record for sending; it blocks only while the client's buffer is full.
func (p *AsyncProducer) Produce(ctx context.Context, r *kgo.Record) {
	p.wg.Add(1)
	p.kc.Produce(ctx, r, func(_ *kgo.Record, err error) {
		defer p.wg.Done()
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.failed++
			if p.first == nil {
				p.first = err
			}
			return
		}
		p.acked++
	})
}

// Err returns the first failure so far, so a caller can stop early.
func (p *AsyncProducer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// Wait flushes the buffered records and waits for all their results. It returns how
// many were acknowledged and, if any failed, an error with the count and first cause.
func (p *AsyncProducer) Wait(ctx context.Context) (acked int64, err error) {
	flushErr := p.kc.Flush(ctx)
	if flushErr == nil {
		p.wg.Wait()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failed > 0 {
		err = fmt.Errorf("produce: %d of %d records failed: %w", p.failed, p.failed+p.acked, p.first)
	}
	if flushErr != nil {
		err = errors.Join(err, fmt.Errorf("produce: flush: %w", flushErr))
	}
	return p.acked, err
}
