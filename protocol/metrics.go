package protocol

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the listener's Prometheus series.
type Metrics struct {
	Connections prometheus.Gauge
	Requests    *prometheus.CounterVec
	Latency     *prometheus.HistogramVec
	BytesIn     prometheus.Counter
	BytesOut    prometheus.Counter
	// BytesSendfile is the part of BytesOut sent with sendfile from segment files.
	BytesSendfile    prometheus.Counter
	BytesFetched     prometheus.Counter
	MessagesIn       *prometheus.CounterVec
	TopicBytesIn     *prometheus.CounterVec
	RejectedRequests prometheus.Counter
	HandlerPanics    prometheus.Counter
	// RequestPoolBytes is what requests hold of queued.max.request.bytes.
	RequestPoolBytes prometheus.Gauge
	// Throttles and ThrottleSeconds count responses a client quota throttled and the
	// time they were throttled for.
	Throttles       prometheus.Counter
	ThrottleSeconds prometheus.Counter
	// FetchPollWaiting is the fetches parked in a long poll now; FetchPollWakes counts
	// their wake-ups by a partition, and FetchPollRereads those that read the log again
	// (the rest could not have met MinBytes).
	FetchPollWaiting prometheus.Gauge
	FetchPollWakes   prometheus.Counter
	FetchPollRereads prometheus.Counter
}

// NewMetrics creates the series and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shale", Name: "connections", Help: "Open Kafka client connections."}),
		Requests:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Name: "requests_total", Help: "Kafka requests received, by API."}, []string{"api"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shale", Name: "request_duration_seconds", Help: "Time from reading a request to writing its response, by API.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)}, []string{"api"}),
		BytesIn:          prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "network_bytes_in_total", Help: "Request bytes read from clients."}),
		BytesOut:         prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "network_bytes_out_total", Help: "Response bytes written to clients."}),
		BytesSendfile:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "network_bytes_sendfile_total", Help: "Response bytes sent with sendfile from segment files (part of network_bytes_out_total)."}),
		BytesFetched:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "fetch_bytes_total", Help: "Record bytes returned by fetches."}),
		MessagesIn:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Name: "messages_in_total", Help: "Records appended, by topic."}, []string{"topic"}),
		TopicBytesIn:     prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shale", Name: "topic_bytes_in_total", Help: "Record batch bytes appended, by topic."}, []string{"topic"}),
		RejectedRequests: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "rejected_requests_total", Help: "Requests that closed their connection: oversized, malformed or unknown."}),
		HandlerPanics:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "handler_panics_total", Help: "Handler panics recovered (each is a bug)."}),
		RequestPoolBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shale", Name: "request_pool_bytes", Help: "Request bytes held of queued.max.request.bytes."}),
		Throttles:        prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "quota_throttles_total", Help: "Responses throttled by a client quota."}),
		ThrottleSeconds:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "quota_throttle_seconds_total", Help: "Time clients were throttled for by quotas."}),
		FetchPollWaiting: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shale", Name: "fetch_poll_waiting", Help: "Fetches parked in a long poll (MinBytes, MaxWaitMs)."}),
		FetchPollWakes:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "fetch_poll_wakes_total", Help: "Wake-ups of parked fetches by an append or a partition change."}),
		FetchPollRereads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shale", Name: "fetch_poll_rereads_total", Help: "Wake-ups of parked fetches that read the log again (the others could not have met MinBytes)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Connections, m.Requests, m.Latency, m.BytesIn, m.BytesOut, m.BytesSendfile, m.BytesFetched, m.MessagesIn, m.TopicBytesIn, m.RejectedRequests, m.HandlerPanics,
			m.RequestPoolBytes, m.Throttles, m.ThrottleSeconds, m.FetchPollWaiting, m.FetchPollWakes, m.FetchPollRereads)
	}
	return m
}
