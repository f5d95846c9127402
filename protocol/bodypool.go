package protocol

import (
	"math/bits"
	"sync"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Request bodies of Produce are recycled. Each was a fresh allocation the size of the
// request, zeroed by the runtime and then overwritten from the socket: in a profile of
// produce-8p-1k-acks1 that zeroing alone was a quarter of the broker's CPU, and every
// byte produced was also a byte of garbage. Only Produce is recycled because its
// handler copies the record batches into the log before it returns (replication.Append
// is synchronous) and keeps no slice of the body; kmsg decodes []byte fields as slices
// of the body, and other handlers keep some (JoinGroup metadata, SyncGroup assignments).

const (
	minPooledBody = 4 << 10  // smaller bodies are cheap to allocate
	maxPooledBody = 64 << 20 // larger ones are rare enough not to keep
)

// bodyPools[k] holds buffers whose capacity is at least 1<<k; 27 classes reach
// maxPooledBody (bits.Len(64<<20)).
var bodyPools [27]sync.Pool

// getBody returns a recycled buffer of at least n bytes, or nil when there is none (the
// caller then allocates as the bytes arrive).
func getBody(n int) []byte {
	if n < minPooledBody || n > maxPooledBody {
		return nil
	}
	k := bits.Len(uint(n - 1)) // the smallest class whose buffers all fit n
	if b, ok := bodyPools[k].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return nil
}

// bodyCap is the capacity to give a new buffer for a body of n bytes: its class size
// when the pool takes such bodies, so that the buffer fits any body of its class later.
func bodyCap(n int) int {
	if n < minPooledBody || n > maxPooledBody {
		return n
	}
	return 1 << bits.Len(uint(n-1))
}

// putBody recycles b; nothing may use it afterwards.
func putBody(b []byte) {
	c := cap(b)
	if c < minPooledBody || c > 2*maxPooledBody {
		return
	}
	k := min(bits.Len(uint(c))-1, len(bodyPools)-1) // the largest class b satisfies
	b = b[:0]
	bodyPools[k].Put(&b)
}

// recyclable reports whether the body of a request with this key may be recycled once
// its response is written.
func recyclable(key int16) bool { return key == kmsg.Produce.Int16() }
