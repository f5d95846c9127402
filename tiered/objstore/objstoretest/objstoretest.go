// Package objstoretest is the conformance suite of objstore.Store: every implementation
// (Memory, the S3 store against an in-process fake and against a real S3 server) runs
// it, so that the remote log can rely on one behaviour.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shalelog/shale/tiered/objstore"
)

// Options adapt the suite to a store.
type Options struct {
	// ListObjects is how many objects the listing test writes: enough to cross a page
	// (S3 returns 1000 keys a page) where the store pages, fewer where writing them is
	// slow. 0 means 1050.
	ListObjects int
}

var seq atomic.Int64

// Run runs the suite against the store newStore returns. Every subtest uses keys under
// a prefix of its own, so that one store (one bucket) can serve them all.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Store, opt Options) {
	if opt.ListObjects == 0 {
		opt.ListObjects = 1050
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s objstore.Store, p string)
	}{
		{"PutGetHead", testPutGetHead},
		{"Ranges", testRanges},
		{"Missing", testMissing},
		{"Replace", testReplace},
		{"SizeMismatch", testSizeMismatch},
		{"Empty", testEmpty},
		{"Large", func(t *testing.T, s objstore.Store, p string) { testLarge(t, s, p) }},
		{"Delete", testDelete},
		{"List", func(t *testing.T, s objstore.Store, p string) { testList(t, s, p, opt.ListObjects) }},
		{"Concurrent", testConcurrent},
		{"Cancelled", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			prefix := fmt.Sprintf("conformance-%d-%d/%s/", time.Now().UnixNano(), seq.Add(1), tc.name)
			tc.fn(t, s, prefix)
		})
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, s objstore.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxFor(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s objstore.Store, key string, off, n int64) []byte {
	t.Helper()
	rc, err := s.Get(ctxFor(t), key, off, n)
	if err != nil {
		t.Fatalf("get %s [%d, +%d): %v", key, off, n, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("get %s [%d, +%d): reading: %v", key, off, n, err)
	}
	return b
}

func payload(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func testPutGetHead(t *testing.T, s objstore.Store, p string) {
	data := payload(1, 1000)
	key := p + "dir/000001-abc.log"
	put(t, s, key, data)
	if got := get(t, s, key, 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("get whole: %d bytes, want the %d put", len(got), len(data))
	}
	o, err := s.Head(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != key || o.Size != int64(len(data)) {
		t.Fatalf("head: %+v, want key %s size %d", o, key, len(data))
	}
}

func testRanges(t *testing.T, s objstore.Store, p string) {
	data := payload(2, 4096)
	key := p + "obj"
	put(t, s, key, data)
	size := int64(len(data))
	for _, r := range []struct{ off, n int64 }{
		{0, 1}, {0, 100}, {1, 1}, {100, 1000}, {4095, 1}, {0, size}, {10, -1}, {0, -1},
		{4000, 500},      // past the end: what exists
		{size, 10},       // at the end: nothing
		{size, -1},       // at the end, to the end: nothing
		{size + 100, 10}, // beyond the end: nothing
		{50, 0},          // zero bytes
	} {
		lo := min(r.off, size)
		hi := size
		if r.n >= 0 {
			hi = min(r.off+r.n, size)
		}
		hi = max(hi, lo)
		if got := get(t, s, key, r.off, r.n); !bytes.Equal(got, data[lo:hi]) {
			t.Errorf("get [%d, +%d): %d bytes, want %d", r.off, r.n, len(got), hi-lo)
		}
	}
	if rc, err := s.Get(ctxFor(t), key, -1, 10); err == nil {
		rc.Close()
		t.Errorf("get at a negative offset succeeded")
	}
}

func testMissing(t *testing.T, s objstore.Store, p string) {
	ctx := ctxFor(t)
	put(t, s, p+"present", []byte("x"))
	for _, n := range []int64{-1, 0, 10} {
		if rc, err := s.Get(ctx, p+"absent", 0, n); !errors.Is(err, objstore.ErrNotFound) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("get of a missing key (n=%d): %v, want ErrNotFound", n, err)
		}
	}
	if _, err := s.Head(ctx, p+"absent"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("head of a missing key: %v, want ErrNotFound", err)
	}
	// A key that is a prefix of another is not that other.
	if _, err := s.Head(ctx, p+"pres"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("head of a key prefix: %v, want ErrNotFound", err)
	}
}

func testReplace(t *testing.T, s objstore.Store, p string) {
	key := p + "obj"
	put(t, s, key, payload(3, 500))
	second := payload(4, 300)
	put(t, s, key, second)
	if got := get(t, s, key, 0, -1); !bytes.Equal(got, second) {
		t.Fatalf("after a second put: %d bytes, want the second put's %d", len(got), len(second))
	}
	if o, err := s.Head(ctxFor(t), key); err != nil || o.Size != 300 {
		t.Fatalf("head after a second put: %+v, %v", o, err)
	}
}

func testSizeMismatch(t *testing.T, s objstore.Store, p string) {
	ctx := ctxFor(t)
	if err := s.Put(ctx, p+"short", bytes.NewReader([]byte("abc")), 5); err == nil {
		t.Errorf("put of 3 bytes announced as 5 succeeded")
	}
	if err := s.Put(ctx, p+"long", bytes.NewReader([]byte("abcdef")), 2); err == nil {
		t.Errorf("put of 6 bytes announced as 2 succeeded")
	}
	for _, k := range []string{"short", "long"} {
		if o, err := s.Head(ctx, p+k); err == nil && o.Size != 0 {
			t.Errorf("a failed put left %s: %+v", k, o)
		}
	}
}

func testEmpty(t *testing.T, s objstore.Store, p string) {
	put(t, s, p+"empty", nil)
	if got := get(t, s, p+"empty", 0, -1); len(got) != 0 {
		t.Fatalf("empty object read as %d bytes", len(got))
	}
	if o, err := s.Head(ctxFor(t), p+"empty"); err != nil || o.Size != 0 {
		t.Fatalf("head of an empty object: %+v, %v", o, err)
	}
}

// onlyReader hides any Seek of the reader it wraps: a body the store must stream.
type onlyReader struct{ io.Reader }

func testLarge(t *testing.T, s objstore.Store, p string) {
	data := payload(5, 6<<20+123)
	key := p + "large"
	if err := s.Put(ctxFor(t), key, onlyReader{bytes.NewReader(data)}, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, key, 0, -1); !bytes.Equal(got, data) {
		t.Fatalf("large object read back as %d bytes, not the %d put", len(got), len(data))
	}
	off := int64(5<<20 + 17)
	if got := get(t, s, key, off, 1<<20); !bytes.Equal(got, data[off:off+1<<20]) {
		t.Fatalf("the tail of the large object differs")
	}
}

func testDelete(t *testing.T, s objstore.Store, p string) {
	ctx := ctxFor(t)
	put(t, s, p+"a", []byte("a"))
	put(t, s, p+"ab", []byte("ab"))
	if err := s.Delete(ctx, p+"a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctx, p+"a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("head after delete: %v, want ErrNotFound", err)
	}
	if got := get(t, s, p+"ab", 0, -1); string(got) != "ab" {
		t.Fatalf("deleting a removed %s too", p+"ab")
	}
	for range 2 {
		if err := s.Delete(ctx, p+"a"); err != nil {
			t.Fatalf("delete of a missing key: %v", err)
		}
	}
}

func testList(t *testing.T, s objstore.Store, p string, n int) {
	ctx := ctxFor(t)
	want := make([]objstore.Object, n)
	for i := range want {
		want[i] = objstore.Object{Key: fmt.Sprintf("%sx/%020d-%d.log", p, i*7, i%3), Size: int64(i % 5)}
	}
	// Written in parallel, in shuffled order: the listing must sort them.
	order := rand.Perm(n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	for _, i := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			o := want[i]
			if err := s.Put(ctx, o.Key, bytes.NewReader(make([]byte, o.Size)), o.Size); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	put(t, s, p+"y/other", []byte("o"))
	put(t, s, p+"xz", []byte("z"))
	got, err := s.List(ctx, p+"x/")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("list: %d objects, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("list entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if got, err := s.List(ctx, p+"nothing/"); err != nil || len(got) != 0 {
		t.Fatalf("list of an empty prefix: %v, %v", got, err)
	}
	all, err := s.List(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != n+2 || all[len(all)-1].Key != p+"y/other" {
		t.Fatalf("list of the whole prefix: %d objects, last %+v", len(all), all[len(all)-1])
	}
	for _, o := range all {
		if !strings.HasPrefix(o.Key, p) {
			t.Fatalf("list returned %s, outside %s", o.Key, p)
		}
	}
}

func testConcurrent(t *testing.T, s objstore.Store, p string) {
	ctx := ctxFor(t)
	const workers, rounds = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := fmt.Sprintf("%sw%d/r%d", p, w, r)
				data := payload(uint64(w*100+r), 1000+w*r)
				if err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
					errs <- err
					return
				}
				rc, err := s.Get(ctx, key, 10, 500)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, data[10:510]) {
					errs <- fmt.Errorf("%s: read back %d bytes (%v)", key, len(got), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	objs, err := s.List(ctx, p)
	if err != nil || len(objs) != workers*rounds {
		t.Fatalf("list after concurrent puts: %d objects, %v", len(objs), err)
	}
}

func testCancelled(t *testing.T, s objstore.Store, p string) {
	put(t, s, p+"obj", []byte("data"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, p+"new", bytes.NewReader([]byte("x")), 1); err == nil {
		t.Errorf("put with a cancelled context succeeded")
	}
	if rc, err := s.Get(ctx, p+"obj", 0, -1); err == nil {
		rc.Close()
		t.Errorf("get with a cancelled context succeeded")
	} else if errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("get with a cancelled context: %v, which says not found", err)
	}
	if _, err := s.List(ctx, p); err == nil {
		t.Errorf("list with a cancelled context succeeded")
	}
}
