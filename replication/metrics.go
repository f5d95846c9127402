package replication

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shalelog/shale/partition"
)

// metrics reports per-partition and replication gauges at scrape time, so the produce
// and fetch paths pay nothing for them, plus the ISR change counters.
type metrics struct {
	m *Manager

	size, leo, hw, start, leader, isrSize     *prometheus.Desc
	count, underReplicated, underMinISR, offl *prometheus.Desc
	reassigning                               *prometheus.Desc
	dirtyRatio, dirtyBytes, sinceClean        *prometheus.Desc

	isrShrinks, isrExpands prometheus.Counter
	replicatedBytes        prometheus.Counter

	// schemaRefusals and schemaRefusedRecords count, by topic, the batches and records
	// schema ID validation refused; refusedTopics are the topics they have series for,
	// dropped at scrape time once the topic is gone.
	schemaRefusals, schemaRefusedRecords *prometheus.CounterVec
	refusedTopics                        sync.Map // topic name -> struct{}
}

func newMetrics(m *Manager) *metrics {
	labels := []string{"topic", "partition"}
	return &metrics{
		m:               m,
		size:            prometheus.NewDesc("shale_log_size_bytes", "Bytes of log held by a partition replica.", labels, nil),
		leo:             prometheus.NewDesc("shale_log_end_offset", "Log end offset of a partition replica.", labels, nil),
		hw:              prometheus.NewDesc("shale_high_watermark", "High watermark of a partition replica.", labels, nil),
		start:           prometheus.NewDesc("shale_log_start_offset", "Log start offset of a partition replica.", labels, nil),
		leader:          prometheus.NewDesc("shale_partition_leader", "1 when this broker leads the partition.", labels, nil),
		isrSize:         prometheus.NewDesc("shale_partition_isr_size", "In-sync replicas of a partition this broker leads.", labels, nil),
		count:           prometheus.NewDesc("shale_partitions", "Partition replicas on this broker.", nil, nil),
		underReplicated: prometheus.NewDesc("shale_under_replicated_partitions", "Partitions led here whose ISR is smaller than their replica set.", nil, nil),
		underMinISR:     prometheus.NewDesc("shale_under_min_isr_partitions", "Partitions led here whose ISR is smaller than min.insync.replicas.", nil, nil),
		offl:            prometheus.NewDesc("shale_offline_partitions", "Partitions in the cluster metadata with no leader.", nil, nil),
		reassigning:     prometheus.NewDesc("shale_reassigning_partitions", "Partitions led here with a reassignment in progress (Kafka's ReassigningPartitions).", nil, nil),
		dirtyRatio:      prometheus.NewDesc("shale_log_cleaner_dirty_ratio", "Share of a compacted replica's cleanable log not yet cleaned (compared with min.cleanable.dirty.ratio).", labels, nil),
		dirtyBytes:      prometheus.NewDesc("shale_log_cleaner_dirty_bytes", "Bytes of a compacted replica's cleanable log not yet cleaned: the cleaner's lag.", labels, nil),
		sinceClean:      prometheus.NewDesc("shale_log_cleaner_seconds_since_last_run", "Seconds since the cleaner last finished with a compacted replica (absent before its first run).", labels, nil),
		isrShrinks:      prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_isr_shrinks_total", Help: "ISR shrinks this broker proposed as leader."}),
		isrExpands:      prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_isr_expands_total", Help: "ISR expansions this broker proposed as leader."}),
		replicatedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "shale_replication_bytes_in_total", Help: "Bytes this broker appended as a follower."}),
		schemaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shale_schema_validation_refusals_total",
			Help: "Produced batches this broker refused with INVALID_RECORD because a record's key or value carried no schema id registered under its subject (confluent.*.schema.validation), by topic."}, []string{"topic"}),
		schemaRefusedRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shale_schema_validation_refused_records_total",
			Help: "Records schema ID validation refused, by topic (every record of a refused batch is lost to the producer; these are the ones at fault)."}, []string{"topic"}),
	}
}

// schemaRefused counts one batch of topic refused by schema ID validation for n of its
// records.
func (c *metrics) schemaRefused(topic string, n int) {
	c.refusedTopics.Store(topic, struct{}{})
	c.schemaRefusals.WithLabelValues(topic).Inc()
	c.schemaRefusedRecords.WithLabelValues(topic).Add(float64(n))
}

func (c *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.leo, c.hw, c.start, c.leader, c.isrSize, c.count, c.underReplicated, c.underMinISR, c.offl, c.reassigning, c.dirtyRatio, c.dirtyBytes, c.sinceClean} {
		ch <- d
	}
	c.isrShrinks.Describe(ch)
	c.isrExpands.Describe(ch)
	c.replicatedBytes.Describe(ch)
	c.schemaRefusals.Describe(ch)
	c.schemaRefusedRecords.Describe(ch)
}

func (c *metrics) Collect(ch chan<- prometheus.Metric) {
	all := c.m.parts.All()
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(len(all)))
	var under, underMin, reassigning int
	for _, p := range all {
		labels := []string{p.Topic(), strconv.Itoa(int(p.Index()))}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(p.Size()), labels...)
		ch <- prometheus.MustNewConstMetric(c.leo, prometheus.GaugeValue, float64(p.LogEndOffset()), labels...)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(p.HighWatermark()), labels...)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(p.LogStartOffset()), labels...)
		leader := 0.0
		if p.Role() == partition.RoleLeader {
			leader = 1
			st := p.State()
			ch <- prometheus.MustNewConstMetric(c.isrSize, prometheus.GaugeValue, float64(len(st.ISR)), labels...)
			rf, moving := c.m.replicationFactor(p.Topic(), p.Index(), len(st.Replicas))
			if len(st.ISR) < rf {
				under++
			}
			if moving {
				reassigning++
			}
			if len(st.ISR) < p.Settings().MinInsyncReplicas {
				underMin++
			}
		}
		ch <- prometheus.MustNewConstMetric(c.leader, prometheus.GaugeValue, leader, labels...)
		if cs, ok := p.CleanerStatus(); ok {
			ch <- prometheus.MustNewConstMetric(c.dirtyRatio, prometheus.GaugeValue, cs.DirtyRatio, labels...)
			ch <- prometheus.MustNewConstMetric(c.dirtyBytes, prometheus.GaugeValue, float64(cs.DirtyBytes), labels...)
			if !cs.LastRun.IsZero() {
				ch <- prometheus.MustNewConstMetric(c.sinceClean, prometheus.GaugeValue, time.Since(cs.LastRun).Seconds(), labels...)
			}
		}
	}
	offline := 0
	for _, t := range c.m.Image().Topics {
		for _, p := range t.Partitions {
			if p.Leader < 0 {
				offline++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.underReplicated, prometheus.GaugeValue, float64(under))
	ch <- prometheus.MustNewConstMetric(c.underMinISR, prometheus.GaugeValue, float64(underMin))
	ch <- prometheus.MustNewConstMetric(c.offl, prometheus.GaugeValue, float64(offline))
	ch <- prometheus.MustNewConstMetric(c.reassigning, prometheus.GaugeValue, float64(reassigning))
	c.isrShrinks.Collect(ch)
	c.isrExpands.Collect(ch)
	c.replicatedBytes.Collect(ch)
	c.refusedTopics.Range(func(k, _ any) bool {
		if topic := k.(string); c.m.Image().Topic(topic) == nil {
			c.refusedTopics.Delete(topic)
			c.schemaRefusals.DeleteLabelValues(topic)
			c.schemaRefusedRecords.DeleteLabelValues(topic)
		}
		return true
	})
	c.schemaRefusals.Collect(ch)
	c.schemaRefusedRecords.Collect(ch)
}
