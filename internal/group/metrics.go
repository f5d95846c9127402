package group

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// HighWatermarkFunc tells the lag collector a partition's high watermark; ok is false
// when this broker does not lead the partition.
type HighWatermarkFunc func(topic string, partition int32) (hw int64, ok bool)

// lagCollector computes consumer lag at scrape time, so commits and fetches pay nothing
// for it.
type lagCollector struct {
	c  *Coordinator
	hw HighWatermarkFunc

	lag, committed, members, rebalances *prometheus.Desc
}

// LagCollector returns a Prometheus collector of consumer lag: per group, topic and
// partition the committed offset and the lag (high watermark minus committed offset), for
// every group with committed offsets and every partition whose high watermark hw knows.
// Given a hw that answers for the partitions this broker leads, each series appears on
// exactly one broker of the cluster, so a Prometheus scraping every broker sees the
// whole lag. It also reports the member count of the groups this broker coordinates and
// the rebalances it completed.
func (c *Coordinator) LagCollector(hw HighWatermarkFunc) prometheus.Collector {
	labels := []string{"group", "topic", "partition"}
	return &lagCollector{
		c:          c,
		hw:         hw,
		lag:        prometheus.NewDesc("shale_consumer_group_lag", "Records between a group's committed offset and the partition's high watermark.", labels, nil),
		committed:  prometheus.NewDesc("shale_consumer_group_committed_offset", "A group's committed offset of a partition.", labels, nil),
		members:    prometheus.NewDesc("shale_consumer_group_members", "Members of a group this broker coordinates.", []string{"group", "state"}, nil),
		rebalances: prometheus.NewDesc("shale_consumer_group_rebalances_total", "Group generations formed by this coordinator.", nil, nil),
	}
}

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{l.lag, l.committed, l.members, l.rebalances} {
		ch <- d
	}
}

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c := l.c
	ch <- prometheus.MustNewConstMetric(l.rebalances, prometheus.CounterValue, float64(c.rebalances.Load()))
	c.mu.Lock()
	for _, g := range c.groups {
		if g.state != Dead {
			ch <- prometheus.MustNewConstMetric(l.members, prometheus.GaugeValue, float64(len(g.members)), g.id, g.state.String())
		}
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.StoreTimeout)
	defer cancel()
	ids, err := c.store.ListOffsetGroups(ctx)
	if err != nil {
		c.lg.Warn("lag metrics: listing groups failed", "err", err)
		return
	}
	if l.hw == nil {
		return
	}
	for _, id := range ids {
		offs, err := c.store.FetchOffsets(ctx, id, nil)
		if err != nil {
			c.lg.Warn("lag metrics: fetching offsets failed", "group", id, "err", err)
			return
		}
		for _, o := range offs {
			hw, ok := l.hw(o.Topic, o.Partition)
			if !ok {
				continue
			}
			labels := []string{id, o.Topic, strconv.Itoa(int(o.Partition))}
			ch <- prometheus.MustNewConstMetric(l.committed, prometheus.GaugeValue, float64(o.Offset), labels...)
			if o.Offset >= 0 {
				ch <- prometheus.MustNewConstMetric(l.lag, prometheus.GaugeValue, float64(max(hw-o.Offset, 0)), labels...)
			}
		}
	}
}
