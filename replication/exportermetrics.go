package replication

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shalelog/shale/partition"
)

// The series below carry the names and labels that kafka_exporter
// (github.com/danielqsj/kafka_exporter) and Kafka's JMX exporter with Strimzi's rules
// (kafka-metrics.yaml, lowercaseOutputName) publish, so that the community dashboards
// built on them (Grafana 7589, Strimzi's kafka and kafka-exporter dashboards) chart a
// Shale cluster unchanged. They are computed at scrape time from the replicas; only the
// per-topic traffic counters are counted as requests pass, with atomic adds.
//
// Where each series comes from, so that sum() over every broker is right:
//   - kafka_topic_partition_* (kafka_exporter) and kafka_cluster_partition_* (JMX) come
//     from the partition's leader only. kafka_exporter reports each partition once for
//     the whole cluster, and Kafka's Partition MBeans report these values only on the
//     leader (0 on followers).
//   - kafka_log_log_* and kafka_server_replicamanager_partitioncount come from every
//     replica, as Kafka's Log MBeans do: summed, they are the cluster's disk use.
//   - kafka_server_brokertopicmetrics_* count what this broker served, as in Kafka.

// topicTraffic counts one topic's traffic through this broker, as Kafka's
// BrokerTopicMetrics do.
type topicTraffic struct {
	messagesIn, bytesIn, bytesOut atomic.Int64
	produceReqs, failedProduce    atomic.Int64
	fetchReqs, failedFetch        atomic.Int64
}

// traffic holds the per-topic counters. The all-topics figures are summed at scrape
// time rather than counted on the request path, where one set of counters shared by
// every topic would be contended by every core; retired keeps the counts of topics
// dropped since, so that the sums never go backwards.
type traffic struct {
	topics              sync.Map // topic name -> *topicTraffic
	replicationBytesOut atomic.Int64

	mu      sync.Mutex // serializes scrapes: pruning moves counts into retired
	retired topicTraffic
}

func (t *traffic) topic(name string) *topicTraffic {
	if v, ok := t.topics.Load(name); ok {
		return v.(*topicTraffic)
	}
	v, _ := t.topics.LoadOrStore(name, new(topicTraffic))
	return v.(*topicTraffic)
}

// produced counts one partition of a produce request once Append is done with it.
func (t *traffic) produced(pp *ProducePartition) {
	c := t.topic(pp.Topic)
	c.produceReqs.Add(1)
	if pp.Err != nil {
		c.failedProduce.Add(1)
		return
	}
	c.messagesIn.Add(int64(pp.RecordCount))
	c.bytesIn.Add(int64(pp.Bytes))
}

// fetched counts one partition of a fetch. Bytes read by followers are replication
// traffic, which Kafka keeps out of BytesOutPerSec.
func (t *traffic) fetched(topic string, follower bool, res *FetchResult) {
	c := t.topic(topic)
	c.fetchReqs.Add(1)
	if res.Err != nil {
		c.failedFetch.Add(1)
	}
	if res.View == nil {
		return
	}
	if follower {
		t.replicationBytesOut.Add(int64(res.View.Size))
	} else {
		c.bytesOut.Add(int64(res.View.Size))
	}
}

// counts is a plain copy of a topicTraffic.
type counts struct {
	messagesIn, bytesIn, bytesOut, produceReqs, failedProduce, fetchReqs, failedFetch int64
}

func (c *topicTraffic) load() counts {
	return counts{c.messagesIn.Load(), c.bytesIn.Load(), c.bytesOut.Load(), c.produceReqs.Load(),
		c.failedProduce.Load(), c.fetchReqs.Load(), c.failedFetch.Load()}
}

func (c *topicTraffic) add(n counts) {
	c.messagesIn.Add(n.messagesIn)
	c.bytesIn.Add(n.bytesIn)
	c.bytesOut.Add(n.bytesOut)
	c.produceReqs.Add(n.produceReqs)
	c.failedProduce.Add(n.failedProduce)
	c.fetchReqs.Add(n.fetchReqs)
	c.failedFetch.Add(n.failedFetch)
}

// snapshot returns each current topic's counts and the all-topics sums, dropping the
// counters of topics that exists reports gone.
func (t *traffic) snapshot(exists func(string) bool) (map[string]counts, counts) {
	t.mu.Lock()
	defer t.mu.Unlock()
	byTopic := map[string]counts{}
	t.topics.Range(func(k, v any) bool {
		name, c := k.(string), v.(*topicTraffic)
		if !exists(name) {
			// Deleted (or never created: requests for unknown topics count too, as in
			// Kafka), so that names do not pile up.
			t.topics.Delete(name)
			t.retired.add(c.load())
			return true
		}
		byTopic[name] = c.load()
		return true
	})
	all := t.retired.load()
	for _, c := range byTopic {
		all.messagesIn += c.messagesIn
		all.bytesIn += c.bytesIn
		all.bytesOut += c.bytesOut
		all.produceReqs += c.produceReqs
		all.failedProduce += c.failedProduce
		all.fetchReqs += c.fetchReqs
		all.failedFetch += c.failedFetch
	}
	return byTopic, all
}

// exporterMetrics is the collector of the kafka_exporter and JMX-exporter series.
type exporterMetrics struct {
	m *Manager

	// kafka_exporter, per partition, from its leader.
	curOffset, oldestOffset, leader, replicas, isr, preferred, underRepl *prometheus.Desc
	// JMX kafka.cluster:type=Partition, from the leader.
	cpUnderRepl, cpUnderMinISR, cpAtMinISR, cpReplicas, cpISR *prometheus.Desc
	// JMX kafka.log:type=Log, from every replica.
	logSize, logEnd, logStart *prometheus.Desc
	// JMX kafka.server:type=ReplicaManager.
	rmPartitions, rmLeaders, rmUnderRepl, rmUnderMinISR, rmAtMinISR *prometheus.Desc
	rmShrinks, rmExpands                                            *prometheus.Desc
	// JMX kafka.server:type=BrokerTopicMetrics, by topic and for all topics (no topic).
	btMessagesIn, btBytesIn, btBytesOut, btProduce, btFailedProduce, btFetch, btFailedFetch *prometheus.Desc
	btReplBytesIn, btReplBytesOut                                                           *prometheus.Desc
}

func newExporterMetrics(m *Manager) *exporterMetrics {
	tp := []string{"topic", "partition"}
	topic := []string{"topic"}
	d := prometheus.NewDesc
	return &exporterMetrics{
		m:            m,
		curOffset:    d("kafka_topic_partition_current_offset", "High watermark of a partition (kafka_exporter's current offset), from its leader.", tp, nil),
		oldestOffset: d("kafka_topic_partition_oldest_offset", "Log start offset of a partition, from its leader.", tp, nil),
		leader:       d("kafka_topic_partition_leader", "Leader broker id of a partition, from its leader.", tp, nil),
		replicas:     d("kafka_topic_partition_replicas", "Assigned replicas of a partition, from its leader.", tp, nil),
		isr:          d("kafka_topic_partition_in_sync_replica", "In-sync replicas of a partition, from its leader.", tp, nil),
		preferred:    d("kafka_topic_partition_leader_is_preferred", "1 when a partition is led by its preferred replica, from its leader.", tp, nil),
		underRepl:    d("kafka_topic_partition_under_replicated_partition", "1 when a partition's ISR is smaller than its replica set, from its leader.", tp, nil),

		cpUnderRepl:   d("kafka_cluster_partition_underreplicated", "1 when this partition, led here, is under-replicated.", tp, nil),
		cpUnderMinISR: d("kafka_cluster_partition_underminisr", "1 when this partition, led here, has fewer in-sync replicas than min.insync.replicas.", tp, nil),
		cpAtMinISR:    d("kafka_cluster_partition_atminisr", "1 when this partition, led here, has exactly min.insync.replicas in-sync replicas.", tp, nil),
		cpReplicas:    d("kafka_cluster_partition_replicascount", "Assigned replicas of a partition led here.", tp, nil),
		cpISR:         d("kafka_cluster_partition_insyncreplicascount", "In-sync replicas of a partition led here.", tp, nil),

		logSize:  d("kafka_log_log_size", "Bytes of log held by this replica.", tp, nil),
		logEnd:   d("kafka_log_log_logendoffset", "Log end offset of this replica.", tp, nil),
		logStart: d("kafka_log_log_logstartoffset", "Log start offset of this replica.", tp, nil),

		rmPartitions:  d("kafka_server_replicamanager_partitioncount", "Partition replicas on this broker.", nil, nil),
		rmLeaders:     d("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", nil, nil),
		rmUnderRepl:   d("kafka_server_replicamanager_underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replica set.", nil, nil),
		rmUnderMinISR: d("kafka_server_replicamanager_underminisrpartitioncount", "Partitions led here with fewer in-sync replicas than min.insync.replicas.", nil, nil),
		rmAtMinISR:    d("kafka_server_replicamanager_atminisrpartitioncount", "Partitions led here with exactly min.insync.replicas in-sync replicas.", nil, nil),
		rmShrinks:     d("kafka_server_replicamanager_isrshrinks_total", "ISR shrinks this broker made as leader.", nil, nil),
		rmExpands:     d("kafka_server_replicamanager_isrexpands_total", "ISR expansions this broker made as leader.", nil, nil),

		btMessagesIn:    d("kafka_server_brokertopicmetrics_messagesin_total", "Records appended as leader; without topic, over all topics.", topic, nil),
		btBytesIn:       d("kafka_server_brokertopicmetrics_bytesin_total", "Record batch bytes appended as leader; without topic, over all topics.", topic, nil),
		btBytesOut:      d("kafka_server_brokertopicmetrics_bytesout_total", "Record bytes read by consumers (not followers); without topic, over all topics.", topic, nil),
		btProduce:       d("kafka_server_brokertopicmetrics_totalproducerequests_total", "Partitions of produce requests; without topic, over all topics.", topic, nil),
		btFailedProduce: d("kafka_server_brokertopicmetrics_failedproducerequests_total", "Partitions of produce requests that failed; without topic, over all topics.", topic, nil),
		btFetch:         d("kafka_server_brokertopicmetrics_totalfetchrequests_total", "Partitions of fetch requests; without topic, over all topics.", topic, nil),
		btFailedFetch:   d("kafka_server_brokertopicmetrics_failedfetchrequests_total", "Partitions of fetch requests that failed; without topic, over all topics.", topic, nil),
		btReplBytesIn:   d("kafka_server_brokertopicmetrics_replicationbytesin_total", "Bytes this broker appended as a follower.", nil, nil),
		btReplBytesOut:  d("kafka_server_brokertopicmetrics_replicationbytesout_total", "Bytes followers read from this broker.", nil, nil),
	}
}

func (e *exporterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		e.curOffset, e.oldestOffset, e.leader, e.replicas, e.isr, e.preferred, e.underRepl,
		e.cpUnderRepl, e.cpUnderMinISR, e.cpAtMinISR, e.cpReplicas, e.cpISR,
		e.logSize, e.logEnd, e.logStart,
		e.rmPartitions, e.rmLeaders, e.rmUnderRepl, e.rmUnderMinISR, e.rmAtMinISR, e.rmShrinks, e.rmExpands,
		e.btMessagesIn, e.btBytesIn, e.btBytesOut, e.btProduce, e.btFailedProduce, e.btFetch, e.btFailedFetch,
		e.btReplBytesIn, e.btReplBytesOut,
	} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (e *exporterMetrics) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	all := e.m.parts.All()
	var leaders, under, underMin, atMin int
	for _, p := range all {
		labels := []string{p.Topic(), strconv.Itoa(int(p.Index()))}
		gauge(e.logSize, float64(p.Size()), labels...)
		gauge(e.logEnd, float64(p.LogEndOffset()), labels...)
		gauge(e.logStart, float64(p.LogStartOffset()), labels...)
		if p.Role() != partition.RoleLeader {
			continue
		}
		leaders++
		st := p.State()
		minISR := p.Settings().MinInsyncReplicas
		nISR, nRepl := len(st.ISR), len(st.Replicas)
		rf, _ := e.m.replicationFactor(p.Topic(), p.Index(), nRepl)
		isUnder, isUnderMin, isAtMin := nISR < rf, nISR < minISR, nISR == minISR
		if isUnder {
			under++
		}
		if isUnderMin {
			underMin++
		}
		if isAtMin {
			atMin++
		}
		gauge(e.curOffset, float64(p.HighWatermark()), labels...)
		gauge(e.oldestOffset, float64(p.LogStartOffset()), labels...)
		gauge(e.leader, float64(e.m.cfg.NodeID), labels...)
		gauge(e.replicas, float64(nRepl), labels...)
		gauge(e.isr, float64(nISR), labels...)
		gauge(e.preferred, b2f(nRepl > 0 && st.Replicas[0] == e.m.cfg.NodeID), labels...)
		gauge(e.underRepl, b2f(isUnder), labels...)
		gauge(e.cpUnderRepl, b2f(isUnder), labels...)
		gauge(e.cpUnderMinISR, b2f(isUnderMin), labels...)
		gauge(e.cpAtMinISR, b2f(isAtMin), labels...)
		gauge(e.cpReplicas, float64(nRepl), labels...)
		gauge(e.cpISR, float64(nISR), labels...)
	}
	gauge(e.rmPartitions, float64(len(all)))
	gauge(e.rmLeaders, float64(leaders))
	gauge(e.rmUnderRepl, float64(under))
	gauge(e.rmUnderMinISR, float64(underMin))
	gauge(e.rmAtMinISR, float64(atMin))
	counter(e.rmShrinks, counterValue(e.m.m.isrShrinks))
	counter(e.rmExpands, counterValue(e.m.m.isrExpands))
	counter(e.btReplBytesIn, counterValue(e.m.m.replicatedBytes))
	counter(e.btReplBytesOut, float64(e.m.traffic.replicationBytesOut.Load()))

	emit := func(c counts, topic string) {
		counter(e.btMessagesIn, float64(c.messagesIn), topic)
		counter(e.btBytesIn, float64(c.bytesIn), topic)
		counter(e.btBytesOut, float64(c.bytesOut), topic)
		counter(e.btProduce, float64(c.produceReqs), topic)
		counter(e.btFailedProduce, float64(c.failedProduce), topic)
		counter(e.btFetch, float64(c.fetchReqs), topic)
		counter(e.btFailedFetch, float64(c.failedFetch), topic)
	}
	im := e.m.Image()
	byTopic, allTopics := e.m.traffic.snapshot(func(name string) bool { return im.Topic(name) != nil })
	// The all-topics series has an empty topic label, which Prometheus stores as no
	// label at all: the JMX exporter's all-topics MBean has none either, and Strimzi's
	// dashboard tells the two apart with topic!="".
	emit(allTopics, "")
	for name, c := range byTopic {
		emit(c, name)
	}
}

// counterValue reads a counter that this package also exports under its shale_ name.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
