package log

import "hash/maphash"

// offsetMapEntrySize is what one key costs in an OffsetMap: a 128-bit hash of the key
// and its latest offset, as in Kafka's SkimpyOffsetMap (which uses MD5).
const offsetMapEntrySize = 24

// offsetMapLoadFactor is Kafka's log.cleaner.io.buffer.load.factor: open addressing
// gets slow as the table fills, so the map reports full past this fraction.
const offsetMapLoadFactor = 0.9

// OffsetMap maps record keys to the latest offset seen for them, in a fixed amount of
// memory (log.cleaner.dedupe.buffer.size): keys are stored as 128-bit hashes, so two
// keys collide with negligible probability and the memory never grows with key sizes.
// The table starts small and doubles up to the bound, so a cleaner thread of a broker
// whose compacted logs are small never touches the whole buffer.
// It is not safe for concurrent use; each cleaner thread has its own.
type OffsetMap struct {
	seed1, seed2 maphash.Seed
	slots        []offsetSlot
	maxSlots     int
	n, limit     int
	latest       int64 // largest offset put since the last Reset, -1 if none
}

// initialOffsetMapSlots is the table's first size.
const initialOffsetMapSlots = 1024

type offsetSlot struct {
	h1, h2 uint64 // h1|h2 == 0 marks an empty slot (hashes are forced nonzero)
	offset int64
}

// NewOffsetMap returns a map using about bufferBytes of memory (at least 16 slots).
func NewOffsetMap(bufferBytes int64) *OffsetMap {
	n := int(max(bufferBytes/offsetMapEntrySize, 16))
	m := &OffsetMap{seed1: maphash.MakeSeed(), seed2: maphash.MakeSeed(), maxSlots: n, latest: -1}
	m.slots = make([]offsetSlot, min(n, initialOffsetMapSlots))
	m.limit = max(int(float64(n)*offsetMapLoadFactor), 1)
	return m
}

// grow doubles the table (up to maxSlots) when one more key would take it past the
// load factor, and reports whether it did.
func (m *OffsetMap) grow() bool {
	if len(m.slots) >= m.maxSlots || float64(m.n+1) <= float64(len(m.slots))*offsetMapLoadFactor {
		return false
	}
	old := m.slots
	m.slots = make([]offsetSlot, min(2*len(old), m.maxSlots))
	for _, s := range old {
		if s.h1 != 0 || s.h2 != 0 {
			*m.find(s.h1, s.h2) = s
		}
	}
	return true
}

// Capacity is how many keys the map holds before it is full.
func (m *OffsetMap) Capacity() int { return m.limit }

// Len is how many keys it holds.
func (m *OffsetMap) Len() int { return m.n }

// Latest is the largest offset put since the last Reset, -1 if none.
func (m *OffsetMap) Latest() int64 { return m.latest }

// Reset empties the map.
func (m *OffsetMap) Reset() {
	clear(m.slots)
	m.n, m.latest = 0, -1
}

func (m *OffsetMap) hash(key []byte) (uint64, uint64) {
	h1 := maphash.Bytes(m.seed1, key)
	h2 := maphash.Bytes(m.seed2, key)
	if h1 == 0 && h2 == 0 {
		h1 = 1
	}
	return h1, h2
}

// find returns the slot holding the hash or the empty slot where it would go.
func (m *OffsetMap) find(h1, h2 uint64) *offsetSlot {
	// Linear probing ends: the load factor keeps some slot empty.
	n := uint64(len(m.slots))
	for i := h1 % n; ; i = (i + 1) % n {
		s := &m.slots[i]
		if (s.h1 == 0 && s.h2 == 0) || (s.h1 == h1 && s.h2 == h2) {
			return s
		}
	}
}

// Put records offset as key's latest. It reports false, changing nothing, when the key
// is new and the map is full.
func (m *OffsetMap) Put(key []byte, offset int64) bool {
	h1, h2 := m.hash(key)
	s := m.find(h1, h2)
	if s.h1 == 0 && s.h2 == 0 {
		if m.n >= m.limit {
			return false
		}
		if m.grow() {
			s = m.find(h1, h2)
		}
		s.h1, s.h2 = h1, h2
		m.n++
	}
	s.offset = offset
	m.latest = max(m.latest, offset)
	return true
}

// Get returns key's latest offset.
func (m *OffsetMap) Get(key []byte) (int64, bool) {
	h1, h2 := m.hash(key)
	s := m.find(h1, h2)
	if s.h1 == 0 && s.h2 == 0 {
		return -1, false
	}
	return s.offset, true
}
