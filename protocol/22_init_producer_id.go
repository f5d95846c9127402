package protocol

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/internal/metadata"
)

// ProducerIDs hands out producer ids from blocks the controller allocates, so ids are
// unique across the cluster without a controller round trip per producer.
type ProducerIDs struct {
	store metadata.Store
	mu    sync.Mutex
	next  int64
	end   int64 // exclusive
}

// NewProducerIDs draws blocks from store.
func NewProducerIDs(store metadata.Store) *ProducerIDs { return &ProducerIDs{store: store} }

// Next returns a fresh producer id.
func (p *ProducerIDs) Next(ctx context.Context) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		first, n, err := p.store.AllocateProducerIDs(ctx)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		p.next, p.end = first, first+int64(n)
	}
	id := p.next
	p.next++
	return id, nil
}

func (s *Server) handleInitProducerID(ctx context.Context, r *Request) Result {
	req := r.Kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		// Transactions need a transaction coordinator, which Shale does not have yet;
		// a non-retriable error makes the client fail fast rather than retry forever.
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return Result{Resp: resp}
	}
	// Without a transactional id Kafka always hands out a new id at epoch 0, also when
	// the producer asks to bump the epoch of its old one (KIP-360).
	id, err := s.deps.ProducerIDs.Next(ctx)
	if err != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		s.lg.Warn("InitProducerId failed", "err", err)
		return Result{Resp: resp}
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return Result{Resp: resp}
}
