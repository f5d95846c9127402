package server

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/partition"
)

// partitionCollector reports per-partition gauges at scrape time, so the produce path
// pays nothing for them.
type partitionCollector struct {
	parts                    *partition.Manager
	size, leo, hw, start, up *prometheus.Desc
	count                    *prometheus.Desc
}

func newPartitionCollector(parts *partition.Manager) *partitionCollector {
	labels := []string{"topic", "partition"}
	return &partitionCollector{
		parts: parts,
		size:  prometheus.NewDesc("shale_log_size_bytes", "Bytes of log held by a partition replica.", labels, nil),
		leo:   prometheus.NewDesc("shale_log_end_offset", "Log end offset of a partition replica.", labels, nil),
		hw:    prometheus.NewDesc("shale_high_watermark", "High watermark of a partition replica.", labels, nil),
		start: prometheus.NewDesc("shale_log_start_offset", "Log start offset of a partition replica.", labels, nil),
		up:    prometheus.NewDesc("shale_partition_leader", "1 when this broker leads the partition.", labels, nil),
		count: prometheus.NewDesc("shale_partitions", "Partition replicas on this broker.", nil, nil),
	}
}

func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.leo, c.hw, c.start, c.up, c.count} {
		ch <- d
	}
}

func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	all := c.parts.All()
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(all)))
	for _, p := range all {
		labels := []string{p.Topic(), strconv.Itoa(int(p.Index()))}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Size()), labels...)
		ch <- prometheus.MustNewConstMetric(c.leo, prometheus.GaugeValue, float64(p.LogEndOffset()), labels...)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(p.HighWatermark()), labels...)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(p.LogStartOffset()), labels...)
		leader := 0.0
		if p.Role() == partition.RoleLeader {
			leader = 1
		}
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, leader, labels...)
	}
}
