package protocol

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// memoryPool bounds the request bytes the broker holds across all connections
// (queued.max.request.bytes), as Kafka's SimpleMemoryPool does for its network threads.
// Like Kafka's non-strict pool, a reservation succeeds whenever the pool is not
// exhausted, even if it takes the pool past its capacity: a request larger than what is
// left never starves behind small ones, and the bytes held stay below capacity plus one
// request (socket.request.max.bytes).
type memoryPool struct {
	capacity int64 // <= 0: unbounded
	gauge    prometheus.Gauge

	mu   sync.Mutex
	used int64
	// freed is closed and replaced whenever bytes are released, waking the readers
	// muted on an exhausted pool.
	freed chan struct{}
}

func newMemoryPool(capacity int64, gauge prometheus.Gauge) *memoryPool {
	return &memoryPool{capacity: capacity, gauge: gauge, freed: make(chan struct{})}
}

// reserve takes n bytes, waiting while the pool is exhausted. The caller is a
// connection's reader, so waiting here is what mutes the connection: it reads nothing
// more until memory is released. It fails only when ctx is done or stop is closed.
func (p *memoryPool) reserve(ctx context.Context, stop <-chan struct{}, n int64) error {
	for {
		p.mu.Lock()
		if p.capacity <= 0 || p.used < p.capacity {
			p.used += n
			p.gauge.Add(float64(n))
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errStopped
		}
	}
}

func (p *memoryPool) release(n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.used -= n
	p.gauge.Sub(float64(n))
	close(p.freed)
	p.freed = make(chan struct{})
	p.mu.Unlock()
}

// Used returns the bytes reserved now.
func (p *memoryPool) Used() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// requestSlots bounds the requests read but not yet handled across all connections
// (queued.max.requests): Kafka's request channel capacity, which blocks its network
// threads when full.
type requestSlots chan struct{}

func (s requestSlots) acquire(ctx context.Context, stop <-chan struct{}) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errStopped
	}
}

func (s requestSlots) release() { <-s }
