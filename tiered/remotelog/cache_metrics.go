package remotelog

import "github.com/prometheus/client_golang/prometheus"

// The chunk cache's metrics, for the broker's /metrics (ChunkCache is a
// prometheus.Collector).
var (
	cacheHitsDesc = prometheus.NewDesc("shale_remote_log_cache_hits_total",
		"Chunk lookups of remote log reads served from the on-disk chunk cache (or a fetch already under way).", nil, nil)
	cacheMissesDesc = prometheus.NewDesc("shale_remote_log_cache_misses_total",
		"Chunk lookups of remote log reads that had to fetch the chunk from the object store.", nil, nil)
	cacheHitBytesDesc = prometheus.NewDesc("shale_remote_log_cache_hit_bytes_total",
		"Bytes of remote log reads served from the on-disk chunk cache.", nil, nil)
	cacheFetchedBytesDesc = prometheus.NewDesc("shale_remote_log_cache_fetched_bytes_total",
		"Bytes the chunk cache fetched from the object store, prefetches included.", nil, nil)
	cachePrefetchesDesc = prometheus.NewDesc("shale_remote_log_cache_prefetches_total",
		"Chunks fetched ahead of sequential remote log readers.", nil, nil)
	cacheEvictionsDesc = prometheus.NewDesc("shale_remote_log_cache_evictions_total",
		"Chunks dropped from the chunk cache to stay within its size.", nil, nil)
	cacheWriteErrorsDesc = prometheus.NewDesc("shale_remote_log_cache_write_errors_total",
		"Chunks the chunk cache could not write to its directory (the reads still succeeded).", nil, nil)
	cacheBytesDesc = prometheus.NewDesc("shale_remote_log_cache_bytes",
		"Bytes of chunks in the on-disk chunk cache.", nil, nil)
	cacheChunksDesc = prometheus.NewDesc("shale_remote_log_cache_chunks",
		"Chunks in the on-disk chunk cache.", nil, nil)
)

// Describe implements prometheus.Collector.
func (c *ChunkCache) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cacheHitsDesc, cacheMissesDesc, cacheHitBytesDesc, cacheFetchedBytesDesc,
		cachePrefetchesDesc, cacheEvictionsDesc, cacheWriteErrorsDesc, cacheBytesDesc, cacheChunksDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *ChunkCache) Collect(ch chan<- prometheus.Metric) {
	st := c.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	counter(cacheHitsDesc, st.Hits)
	counter(cacheMissesDesc, st.Misses)
	counter(cacheHitBytesDesc, st.HitBytes)
	counter(cacheFetchedBytesDesc, st.FetchedBytes)
	counter(cachePrefetchesDesc, st.Prefetches)
	counter(cacheEvictionsDesc, st.Evictions)
	counter(cacheWriteErrorsDesc, st.WriteErrors)
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(cacheChunksDesc, prometheus.GaugeValue, float64(st.Chunks))
}

var _ prometheus.Collector = (*ChunkCache)(nil)
