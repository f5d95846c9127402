package producerid

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/shalelog/shale/metadata"
)

// blockStore hands out blocks of 10 ids, or fails while down.
type blockStore struct {
	metadata.Store
	mu    sync.Mutex
	next  int64
	calls int
	down  bool
}

func (s *blockStore) AllocateProducerIDs(context.Context) (int64, int32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.down {
		return 0, 0, errors.New("controller unreachable")
	}
	first := s.next
	s.next += 10
	return first, 10, nil
}

func TestIDsAreUniqueAndPrefetched(t *testing.T) {
	s := &blockStore{}
	a := New(s)
	ctx := context.Background()
	seen := map[int64]bool{}
	for range 9 {
		id, err := a.Next(ctx)
		if err != nil || seen[id] {
			t.Fatalf("id %d, %v", id, err)
		}
		seen[id] = true
	}
	a.Wait() // 9 of 10 used: the next block was requested in the background
	s.mu.Lock()
	s.down = true
	s.mu.Unlock()
	// The controller is gone, yet the next 11 ids come: the rest of this block and the
	// prefetched one.
	for range 11 {
		id, err := a.Next(ctx)
		if err != nil || seen[id] {
			t.Fatalf("id %d during the outage: %v", id, err)
		}
		seen[id] = true
	}
	a.Wait()
	if _, err := a.Next(ctx); err == nil {
		t.Fatal("an id beyond the blocks allocated")
	}
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
	if id, err := a.Next(ctx); err != nil || seen[id] {
		t.Fatalf("after the outage: %d %v", id, err)
	}
	a.Wait()
}

func TestConcurrentCallersShareBlocks(t *testing.T) {
	s := &blockStore{}
	a := New(s)
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				id, err := a.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[id] {
					t.Errorf("id %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	a.Wait()
	if len(seen) != 400 {
		t.Fatalf("%d ids", len(seen))
	}
}
