package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Memory is a Store in memory, for unit tests and the simulation. Its zero value is
// not usable; call NewMemory.
type Memory struct {
	mu      sync.Mutex
	objects map[string][]byte
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{objects: make(map[string][]byte)} }

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, body io.Reader, size int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(body, size+1))
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("objstore: put %s: body has %d bytes, want %d", key, len(data), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = data
	return nil
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string, off, n int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	data, ok := m.objects[key]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("objstore: get %s: %w", key, ErrNotFound)
	}
	if off < 0 {
		return nil, fmt.Errorf("objstore: get %s: negative offset %d", key, off)
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	end := int64(len(data))
	if n >= 0 && off+n < end {
		end = off + n
	}
	return io.NopCloser(bytes.NewReader(data[off:end])), nil
}

// Head implements Store.
func (m *Memory) Head(ctx context.Context, key string) (Object, error) {
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[key]
	if !ok {
		return Object{}, fmt.Errorf("objstore: head %s: %w", key, ErrNotFound)
	}
	return Object{Key: key, Size: int64(len(data))}, nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]Object, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Object
	for k, v := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, Object{Key: k, Size: int64(len(v))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

var _ Store = (*Memory)(nil)
