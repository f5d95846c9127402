package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// patternSize is the length of the shared random text record values are
// cut from: long enough that neighbouring records differ, so compression
// sees text rather than one repeated record.
const patternSize = 64 << 10

// newPattern returns patternSize+maxRecord bytes of random capital letters,
// like Kafka's ProducerPerformance payloads: compressible about as much as
// ordinary text, never all zeros.
func newPattern(maxRecord int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, 0x5a1e))
	b := make([]byte, patternSize+maxRecord)
	for i := range b {
		b[i] = 'A' + byte(rng.IntN(26))
	}
	return b
}

// slot is one record a producer can have in flight. The record, its key and
// its value are allocated once; the hot loop only refills them. A slot is
// its record's Context, which lets the promise find the slot again without
// an allocation or a map.
type slot struct {
	context.Context
	rec      kgo.Record
	key      []byte
	value    []byte
	intended time.Duration
}

// slotPool hands out a producer's slots; its capacity is the producer's
// in-flight limit, so taking a slot is the backpressure.
type slotPool struct {
	free  chan *slot
	slots []slot
}

func newSlotPool(ctx context.Context, n, recordSize int, pattern []byte) *slotPool {
	p := &slotPool{free: make(chan *slot, n), slots: make([]slot, n)}
	values := make([]byte, n*recordSize)
	keys := make([]byte, n*keySize)
	for i := range p.slots {
		s := &p.slots[i]
		s.Context = ctx
		s.value = values[i*recordSize : (i+1)*recordSize : (i+1)*recordSize]
		off := (i * 4099) % patternSize
		copy(s.value, pattern[off:off+recordSize])
		s.key = keys[i*keySize : (i+1)*keySize : (i+1)*keySize]
		p.free <- s
	}
	return p
}

// keySource picks keys according to a KeyDist.
type keySource struct {
	dist  KeyDist
	rng   *rand.Rand
	fixed []byte // Count keys of keySize bytes, for KeysFixed
}

func newKeySource(dist KeyDist, seed uint64) *keySource {
	ks := &keySource{dist: dist, rng: rand.New(rand.NewPCG(seed, 0x6b657973))}
	if dist.Kind == KeysFixed {
		// The same N keys in every run and for every target, so each
		// target sees the same spread of keys over partitions.
		ks.fixed = make([]byte, 0, dist.Count*keySize)
		for i := range dist.Count {
			ks.fixed = fmt.Appendf(ks.fixed, "k%015d", i)
		}
	}
	return ks
}

// key returns the next record's key, written into buf when it is generated.
func (ks *keySource) key(buf []byte) []byte {
	switch ks.dist.Kind {
	case KeysRandom:
		binary.LittleEndian.PutUint64(buf[0:8], ks.rng.Uint64())
		binary.LittleEndian.PutUint64(buf[8:16], ks.rng.Uint64())
		return buf[:keySize]
	case KeysFixed:
		i := ks.rng.IntN(ks.dist.Count)
		return ks.fixed[i*keySize : (i+1)*keySize : (i+1)*keySize]
	}
	return nil
}

// putE2EHeader stamps a value with the run id and the intended send time,
// for the consumer to measure end-to-end latency from.
func putE2EHeader(value []byte, runID uint64, intended time.Duration) {
	binary.LittleEndian.PutUint64(value[0:8], runID)
	binary.LittleEndian.PutUint64(value[8:16], uint64(intended))
}

// readE2EHeader returns the intended send time stamped by this run, or ok
// false for records of another run or another writer.
func readE2EHeader(value []byte, runID uint64) (intended time.Duration, ok bool) {
	if len(value) < e2eHeaderSize || binary.LittleEndian.Uint64(value[0:8]) != runID {
		return 0, false
	}
	return time.Duration(binary.LittleEndian.Uint64(value[8:16])), true
}
