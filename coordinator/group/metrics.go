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
	// The same figures under kafka_exporter's names and labels (consumergroup, topic,
	// partition), for the dashboards built on it.
	keOffset, keLag, keOffsetSum, keLagSum, keMembers *prometheus.Desc
}

// LagCollector returns a Prometheus collector of consumer lag: per group, topic and
// partition the committed offset and the lag (high watermark minus committed offset), for
// every group with committed offsets and every partition whose high watermark hw knows.
// Given a hw that answers for the partitions this broker leads, each series appears on
// exactly one broker of the cluster, so a Prometheus scraping every broker sees the
// whole lag. It also reports the member count of the groups this broker coordinates and
// the rebalances it completed (share groups have their own collector, in
// coordinator/share). Each consumer-group figure is reported twice, as
// shale_consumer_group_* and under kafka_exporter's kafka_consumergroup_* names and
// labels.
func (c *Coordinator) LagCollector(hw HighWatermarkFunc) prometheus.Collector {
	labels := []string{"group", "topic", "partition"}
	keLabels := []string{"consumergroup", "topic", "partition"}
	return &lagCollector{
		c:          c,
		hw:         hw,
		lag:        prometheus.NewDesc("shale_consumer_group_lag", "Records between a group's committed offset and the partition's high watermark.", labels, nil),
		committed:  prometheus.NewDesc("shale_consumer_group_committed_offset", "A group's committed offset of a partition.", labels, nil),
		members:    prometheus.NewDesc("shale_consumer_group_members", "Members of a group this broker coordinates.", []string{"group", "state"}, nil),
		rebalances: prometheus.NewDesc("shale_consumer_group_rebalances_total", "Group generations formed by this coordinator.", nil, nil),

		keOffset:    prometheus.NewDesc("kafka_consumergroup_current_offset", "A group's committed offset of a partition, from the partition's leader.", keLabels, nil),
		keLag:       prometheus.NewDesc("kafka_consumergroup_lag", "High watermark minus a group's committed offset (-1 when none is committed), from the partition's leader.", keLabels, nil),
		keOffsetSum: prometheus.NewDesc("kafka_consumergroup_current_offset_sum", "Sum of a group's committed offsets of the partitions of a topic that this broker leads.", keLabels[:2], nil),
		keLagSum:    prometheus.NewDesc("kafka_consumergroup_lag_sum", "Sum of a group's lag over the partitions of a topic that this broker leads.", keLabels[:2], nil),
		keMembers:   prometheus.NewDesc("kafka_consumergroup_members", "Members of a group, from its coordinator.", keLabels[:1], nil),
	}
}

func (l *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{l.lag, l.committed, l.members, l.rebalances, l.keOffset, l.keLag, l.keOffsetSum, l.keLagSum, l.keMembers} {
		ch <- d
	}
}

func (l *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c := l.c
	ch <- prometheus.MustNewConstMetric(l.rebalances, prometheus.CounterValue, float64(c.rebalances.Load()))
	c.mu.Lock()
	for _, g := range c.groups {
		if g.state != Dead {
			ch <- prometheus.MustNewConstMetric(l.members, prometheus.GaugeValue, float64(g.memberCount()), g.id, g.state.String())
			ch <- prometheus.MustNewConstMetric(l.keMembers, prometheus.GaugeValue, float64(len(g.members)), g.id)
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
		type sums struct{ offset, lag int64 }
		byTopic := map[string]*sums{}
		for _, o := range offs {
			hw, ok := l.hw(o.Topic, o.Partition)
			if !ok {
				continue
			}
			labels := []string{id, o.Topic, strconv.Itoa(int(o.Partition))}
			ch <- prometheus.MustNewConstMetric(l.committed, prometheus.GaugeValue, float64(o.Offset), labels...)
			ch <- prometheus.MustNewConstMetric(l.keOffset, prometheus.GaugeValue, float64(o.Offset), labels...)
			s := byTopic[o.Topic]
			if s == nil {
				s = &sums{}
				byTopic[o.Topic] = s
			}
			if o.Offset < 0 {
				// kafka_exporter's convention, which its users alert on.
				ch <- prometheus.MustNewConstMetric(l.keLag, prometheus.GaugeValue, -1, labels...)
				continue
			}
			lag := max(hw-o.Offset, 0)
			ch <- prometheus.MustNewConstMetric(l.lag, prometheus.GaugeValue, float64(lag), labels...)
			ch <- prometheus.MustNewConstMetric(l.keLag, prometheus.GaugeValue, float64(lag), labels...)
			s.offset += o.Offset
			s.lag += lag
		}
		for topic, s := range byTopic {
			ch <- prometheus.MustNewConstMetric(l.keOffsetSum, prometheus.GaugeValue, float64(s.offset), id, topic)
			ch <- prometheus.MustNewConstMetric(l.keLagSum, prometheus.GaugeValue, float64(s.lag), id, topic)
		}
	}
}
