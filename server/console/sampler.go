package console

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Run samples the cluster every SampleInterval into the history until ctx ends, and
// ends idle sessions on the way.
func (c *Console) Run(ctx context.Context) {
	t := c.clock.NewTicker(c.opts.SampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			// A slow cluster delays the next tick (the ticker drops those missed) rather
			// than cutting every sample short.
			sctx, cancel := context.WithTimeout(ctx, max(c.opts.SampleInterval, 5*time.Second))
			if err := c.SampleNow(sctx); err != nil && ctx.Err() == nil {
				c.lg.Debug("console sample", "err", err)
			}
			cancel()
		}
	}
}

// sampler turns cumulative counters (end offsets, committed offsets) into rates between
// consecutive samples.
type sampler struct {
	c        *Console
	mu       sync.Mutex
	prevAt   time.Time
	prevEnd  map[string]int64 // topic -> sum of end offsets
	prevComm map[string]int64 // topic -> sum over groups of committed offsets
}

// SampleNow takes one sample at the clock's now, then drops series gone quiet and ends
// idle sessions; Run calls it on each tick.
func (c *Console) SampleNow(ctx context.Context) error {
	at := c.clock.Now()
	err := c.smp.sample(ctx, at)
	c.hist.Prune(at)
	c.sessions.sweep(at)
	return err
}

func (s *sampler) sample(ctx context.Context, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, adm, err := s.c.service.get()
	if err != nil {
		return err
	}
	h := s.c.hist
	ends, err := adm.ListEndOffsets(ctx)
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	end := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			end[o.Topic] += o.Offset
		}
	})
	comm := map[string]int64{}
	var errs []error
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list groups: %w", err))
	}
	var classic, share []string
	for g, lg := range groups {
		if lg.GroupType == "share" {
			share = append(share, g)
		} else {
			classic = append(classic, g)
		}
	}
	if len(classic) > 0 {
		lags, err := adm.Lag(ctx, classic...)
		if err != nil {
			errs = append(errs, fmt.Errorf("group lag: %w", err))
		}
		for g, l := range lags {
			if l.Error() != nil {
				continue
			}
			var total int64
			for t, ps := range l.Lag {
				for p, ml := range ps {
					if ml.Err != nil || ml.Lag < 0 {
						continue
					}
					total += ml.Lag
					comm[t] += ml.Commit.At
					h.Add(lagSeries(g, t, p), at, float64(ml.Lag))
				}
			}
			h.Add(lagTotalSeries(g), at, float64(total))
		}
	}
	if len(share) > 0 {
		offs, err := adm.DescribeShareGroupOffsets(ctx, share...)
		if err != nil {
			errs = append(errs, fmt.Errorf("share group offsets: %w", err))
		}
		for g, d := range offs {
			if d.Err != nil {
				continue
			}
			var total int64
			for t, ps := range d.Offsets {
				for p, o := range ps {
					if o.Err != nil || o.Lag < 0 {
						continue
					}
					total += o.Lag
					h.Add(lagSeries(g, t, p), at, float64(o.Lag))
				}
			}
			h.Add(lagTotalSeries(g), at, float64(total))
		}
	}
	if s.prevEnd != nil {
		dt := at.Sub(s.prevAt).Seconds()
		if dt > 0 {
			for t, v := range end {
				if p, ok := s.prevEnd[t]; ok && v >= p {
					h.Add("in/"+t, at, float64(v-p)/dt)
				}
			}
			for t, v := range comm {
				if p, ok := s.prevComm[t]; ok && v >= p {
					h.Add("out/"+t, at, float64(v-p)/dt)
				}
			}
		}
	}
	s.prevAt, s.prevEnd, s.prevComm = at, end, comm
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// lagTotalSeries names a group's total lag; kept apart from the "lag/" prefix so that a
// group's partition series never match another group's prefix.
func lagTotalSeries(group string) string { return "lagtotal/" + group }

func lagSeries(group, topic string, p int32) string {
	return "lag/" + group + "/" + topic + "/" + strconv.Itoa(int(p))
}
