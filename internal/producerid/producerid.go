// Package producerid hands out idempotent producer ids from blocks the controller
// allocates (Kafka's ProducerIdManager), so that ids are unique across the cluster
// without a controller round trip per producer.
package producerid

import (
	"context"
	"fmt"
	"sync"

	"github.com/shalelog/shale/internal/metadata"
)

// Allocator draws producer ids from blocks the controller hands this broker.
type Allocator struct {
	store metadata.Store
	mu    sync.Mutex
	next  int64
	end   int64 // exclusive
}

// New draws blocks from store.
func New(store metadata.Store) *Allocator { return &Allocator{store: store} }

// Next returns a fresh producer id.
func (a *Allocator) Next(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next >= a.end {
		first, n, err := a.store.AllocateProducerIDs(ctx)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		a.next, a.end = first, first+int64(n)
	}
	id := a.next
	a.next++
	return id, nil
}
