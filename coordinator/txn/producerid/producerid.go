// Package producerid hands out idempotent producer ids from blocks the controller
// allocates (Kafka's ProducerIdManager), so that ids are unique across the cluster
// without a controller round trip per producer.
package producerid

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shalelog/shale/metadata"
)

// prefetchTimeout bounds the background request for the next block.
const prefetchTimeout = 10 * time.Second

type block struct{ first, end int64 }

// Allocator draws producer ids from blocks the controller hands this broker. As Kafka's
// broker does, it asks for the next block when the current one is 90% used, so that new
// producers keep getting ids through a short controller outage.
type Allocator struct {
	store metadata.Store

	mu       sync.Mutex
	next     int64
	end      int64 // exclusive
	size     int64 // of the current block
	spare    *block
	fetching bool
	wg       sync.WaitGroup
}

// New draws blocks from store.
func New(store metadata.Store) *Allocator { return &Allocator{store: store} }

func (a *Allocator) allocate(ctx context.Context) (block, error) {
	first, n, err := a.store.AllocateProducerIDs(ctx)
	if err != nil {
		return block{}, fmt.Errorf("allocate producer ids: %w", err)
	}
	return block{first: first, end: first + int64(n)}, nil
}

// Next returns a fresh producer id.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		b := a.spare
		a.spare = nil
		if b == nil {
			a.mu.Unlock()
			got, err := a.allocate(ctx)
			a.mu.Lock()
			if err != nil {
				return 0, err
			}
			b = &got
		}
		if a.next >= a.end { // no other caller installed a block meanwhile
			a.next, a.end, a.size = b.first, b.end, b.end-b.first
		} else if a.spare == nil {
			a.spare = b
		}
	}
	id := a.next
	a.next++
	if a.spare == nil && !a.fetching && a.end-a.next <= a.size/10 {
		a.fetching = true
		a.wg.Add(1)
		go a.prefetch()
	}
	return id, nil
}

func (a *Allocator) prefetch() {
	defer a.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
	defer cancel()
	b, err := a.allocate(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fetching = false
	if err == nil && a.spare == nil {
		a.spare = &b
	}
}

// Wait waits for a background request for the next block to end (tests, shutdown).
func (a *Allocator) Wait() { a.wg.Wait() }
