package sim

import (
	"fmt"
	"strconv"
	"strings"

	shalelog "github.com/shalelog/shale/log"
	"github.com/shalelog/shale/log/records"
	"github.com/shalelog/shale/partition"
)

// genOf is the topic generation a record's value names.
func genOf(v string) int {
	if !strings.HasPrefix(v, "g") {
		return -1
	}
	n, err := strconv.Atoi(v[1:strings.IndexByte(v, '-')])
	if err != nil {
		return -1
	}
	return n
}

// checkServed checks one record a consumer was served: it must belong to the topic
// generation asked for, and must not lie below purged, what DeleteRecords answers had
// purged when the broker served it.
func (w *World) checkServed(g *topicGen, rec record, from int32, purged int64) {
	if gen := genOf(rec.value); gen != g.gen {
		w.violate("recreated topic shows old data: broker %d served %s-%d offset %d = %q of generation %d to a consumer of generation %d",
			from, g.name, rec.index, rec.offset, rec.value, gen, g.gen)
	}
	if low := purged; rec.offset < low {
		w.violate("deleted record served again: broker %d served %s-%d offset %d after DeleteRecords was answered with low watermark %d",
			from, g.name, rec.index, rec.offset, low)
	}
}

// checkInstant checks what must hold at every instant: a replica acts only for the topic
// id it was created for; a current leader's high watermark never passes a member of the
// committed ISR, and its log start never passes its high watermark.
func (w *World) checkInstant() {
	for _, b := range w.brokers {
		if !b.up {
			continue
		}
		for _, p := range b.mgr.Partitions().All() {
			w.lastLEO[replicaKey{b.id, p.TopicID(), p.Index()}] = p.LogEndOffset()
		}
	}
	im := w.ctl.image()
	for _, b := range w.brokers {
		if !b.up {
			continue
		}
		applied := b.mgr.Image()
		for _, p := range b.mgr.Partitions().All() {
			if t := applied.Topic(p.Topic()); t != nil && t.ID != p.TopicID() && p.Role() != partition.RoleNone {
				w.violate("broker %d's replica of %s-%d (topic id %x) acts as %s for topic id %x",
					b.id, p.Topic(), p.Index(), p.TopicID(), p.Role(), t.ID)
				continue
			}
			if p.Role() != partition.RoleLeader {
				continue
			}
			t := im.Topic(p.Topic())
			if t == nil || t.ID != p.TopicID() {
				continue
			}
			mp := im.Partition(p.Topic(), p.Index())
			if mp == nil || mp.Leader != b.id || mp.LeaderEpoch != p.LeaderEpoch() {
				continue
			}
			hw := p.HighWatermark()
			for _, r := range mp.ISR {
				if r == b.id {
					continue
				}
				if leo, ok := w.lastLEO[replicaKey{r, t.ID, p.Index()}]; ok && hw > leo {
					w.violate("high watermark %d of %s-%d (leader %d, epoch %d) passes committed ISR member %d, whose log ends at %d",
						hw, p.Topic(), p.Index(), b.id, p.LeaderEpoch(), r, leo)
				}
			}
			if ls := p.LogStartOffset(); ls > hw {
				w.violate("log start %d of %s-%d on leader %d passes its high watermark %d: uncommitted records deleted",
					ls, p.Topic(), p.Index(), b.id, hw)
			}
		}
	}
}

// committed reads a replica's log from its start up to its high watermark.
func committed(p *partition.Partition) (map[int64]string, error) {
	out := map[int64]string{}
	off := p.LogStartOffset()
	hw := p.HighWatermark()
	for off < hw {
		v, err := p.Read(off, 1<<20, false, true)
		if err != nil {
			return nil, err
		}
		data := viewBytes(v)
		if len(data) == 0 {
			break
		}
		for len(data) >= shalelog.BatchHeaderSize {
			h, recs, err := records.Records(data[:batchLen(data)])
			if err != nil {
				return nil, err
			}
			data = data[h.Size():]
			for _, r := range recs {
				o := h.BaseOffset + int64(r.OffsetDelta)
				if o >= off && o < hw {
					out[o] = trimPad(string(r.Value))
				}
			}
			off = h.LastOffset() + 1
		}
	}
	return out, nil
}

// finalChecks run on the settled cluster: every acknowledged record is in the
// committed log, no replica diverges below the high watermark, nothing a consumer was
// served is missing from the committed log, no idempotent producer's record appears
// twice, and no DeleteRecords was undone.
func (w *World) finalChecks() {
	g := w.topic
	if g == nil || g.dead {
		return
	}
	im := w.ctl.image()
	for idx := range g.partitions {
		mp := im.Partition(g.name, idx)
		if mp == nil {
			w.violate("topic %s generation %d has no partition %d", g.name, g.gen, idx)
			continue
		}
		l := w.broker(mp.Leader)
		var lp *partition.Partition
		if l != nil && l.up {
			lp = l.mgr.Replica(g.name, idx)
		}
		if lp == nil || lp.Role() != partition.RoleLeader || lp.TopicID() != g.id {
			state := "down"
			if l != nil && l.up {
				state = fmt.Sprintf("up, metadata at %d of %d, fenced=%v", l.mgr.Image().Offset, im.Offset, im.Brokers[l.id].Fenced)
				if lp != nil {
					state += fmt.Sprintf(", replica %s in epoch %d", lp.Role(), lp.LeaderEpoch())
				}
			}
			w.violate("liveness: %s-%d has no serving leader after settling (controller says %d, epoch %d, isr %v; that broker: %s)",
				g.name, idx, mp.Leader, mp.LeaderEpoch, mp.ISR, state)
			continue
		}
		log, err := committed(lp)
		if err != nil {
			w.violate("read %s-%d on leader %d: %v", g.name, idx, l.id, err)
			continue
		}
		start := lp.LogStartOffset()
		seen := map[string]int64{}
		for o, v := range log {
			if prev, dup := seen[v]; dup {
				w.violate("idempotent producer duplicated: %q at offsets %d and %d of %s-%d", v, prev, o, g.name, idx)
			}
			seen[v] = o
		}
		for _, r := range g.acked {
			if r.index != idx || r.offset < start {
				continue
			}
			if got, ok := log[r.offset]; !ok || got != r.value {
				w.violate("acknowledged record lost: %q acknowledged at %s-%d offset %d; the committed log has %q there (log start %d, high watermark %d)",
					r.value, g.name, idx, r.offset, got, start, lp.HighWatermark())
			}
		}
		for _, c := range w.consumers {
			if c.g != g || c.index != idx {
				continue
			}
			for _, r := range c.seen {
				if r.offset < start {
					continue
				}
				if got, ok := log[r.offset]; !ok || got != r.value {
					w.violate("consumer was served an uncommitted record: %q at %s-%d offset %d; the committed log has %q there",
						r.value, g.name, idx, r.offset, got)
				}
			}
		}
		if low := g.deleted[idx]; start < low {
			w.violate("deleted records came back: %s-%d starts at %d after DeleteRecords was answered with low watermark %d", g.name, idx, start, low)
		}
		for _, id := range mp.Replicas {
			b := w.broker(id)
			if id == l.id || b == nil || !b.up {
				continue
			}
			q := b.mgr.Replica(g.name, idx)
			if q == nil || q.TopicID() != g.id {
				continue
			}
			other, err := committed(q)
			if err != nil {
				w.violate("read %s-%d on broker %d: %v", g.name, idx, id, err)
				continue
			}
			for o, v := range other {
				if o < start {
					continue
				}
				if lv, ok := log[o]; !ok || lv != v {
					w.violate("replicas diverge below the high watermark: %s-%d offset %d is %q on broker %d and %q on leader %d",
						g.name, idx, o, v, id, lv, l.id)
					break
				}
			}
		}
	}
}
