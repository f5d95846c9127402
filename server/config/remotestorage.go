package config

import (
	"fmt"
	"net/url"
)

// RemoteStorage is the object store of tiered storage (KIP-405): Kafka's
// remote.log.storage.system.enable and remote.log.manager.task.interval.ms, and Shale's
// own remote.storage.s3.* section for its built-in S3 client (Kafka leaves the store to
// a RemoteStorageManager plugin configured under remote.log.storage.manager.impl.prefix).
type RemoteStorage struct {
	// SystemEnable is remote.log.storage.system.enable (default false): this node takes
	// part in tiered storage; topics may set remote.storage.enable only when it is on.
	SystemEnable bool
	// TaskIntervalMs is remote.log.manager.task.interval.ms (default 30000): how often a
	// leader looks for segments to upload and for remote segments retention deletes.
	TaskIntervalMs int64
	// Endpoint is remote.storage.s3.endpoint (default "": AWS S3 in Region,
	// https://s3.<region>.amazonaws.com): the URL of an S3-compatible server, http:// or
	// https://.
	Endpoint string
	// Bucket is remote.storage.s3.bucket: the bucket segments go to; required with
	// SystemEnable on a broker.
	Bucket string
	// Region is remote.storage.s3.region (default us-east-1), the signing region.
	Region string
	// Prefix is remote.storage.s3.prefix (default ""): prepended to every object key, so
	// that clusters can share a bucket.
	Prefix string
	// CredentialsFile is remote.storage.s3.credentials.file (default "": the environment's
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN): a file in the AWS
	// shared-credentials format whose [default] profile is used; it is read again from
	// time to time, so that rotated keys take effect without a restart.
	CredentialsFile string
	// PathStyle is remote.storage.s3.path.style (default false): address buckets as
	// endpoint/bucket/key rather than bucket.endpoint/key, as MinIO, versitygw and most
	// self-hosted servers need.
	PathStyle bool
	// TLSCAFile is remote.storage.s3.tls.ca.file (default "": the system's CAs): PEM CA
	// certificates an https endpoint's certificate must chain to.
	TLSCAFile string
	// AllowHTTP is remote.storage.s3.allow.http (default false): plain http:// to an
	// endpoint that is not a loopback address; segment data would cross the network
	// unencrypted, so it must be asked for.
	AllowHTTP bool
	// CacheDir is remote.storage.cache.dir (default "": remote-log-cache under log.dir,
	// which the log directory's replica scan ignores): where chunks read from the store
	// are cached on disk. It is emptied at start.
	CacheDir string
	// CacheSizeBytes is remote.storage.cache.size.bytes (default 1 GiB): the most the
	// read cache keeps on disk.
	CacheSizeBytes int64
	// CacheChunkBytes is remote.storage.cache.chunk.bytes (default 1 MiB): the unit of
	// every read from the store and of the cache's eviction; the next chunk of a
	// sequential reader is prefetched.
	CacheChunkBytes int64
	// RequestTimeoutMs is remote.storage.s3.request.timeout.ms (default 30000): the most
	// one request to the store may take before it is abandoned and retried later.
	RequestTimeoutMs int64
	// ReaderThreads is remote.log.reader.threads (default 10): the reads of the remote
	// log for consumers' fetches run on this many goroutines, off the request's.
	ReaderThreads int64
	// ReaderMaxPendingTasks is remote.log.reader.max.pending.tasks (default 100): the
	// most remote reads waiting for a reader; a fetch past it is answered
	// UNKNOWN_SERVER_ERROR for that partition, as Kafka does.
	ReaderMaxPendingTasks int64
	// FetchMaxWaitMs is remote.fetch.max.wait.ms (default 500): how long a fetch waits
	// for a remote read before answering that partition empty.
	FetchMaxWaitMs int64
}

func remoteStorageKeys() []*keyDef {
	str := func(field func(*RemoteStorage) *string) accessor {
		return stringField(func(c *Config) *string { return field(&c.RemoteStorage) })
	}
	return []*keyDef{
		key("remote.log.storage.system.enable", "false", "Tiered storage (KIP-405): topics may set remote.storage.enable, and their closed segments are uploaded to the object store remote.storage.s3.* names. Set it alike on every node: controllers validate topic configs against their own.",
			boolField(func(c *Config) *bool { return &c.RemoteStorage.SystemEnable })),
		key("remote.log.manager.task.interval.ms", "30000", "How often a leader looks for segments to upload to the remote log and for remote segments retention deletes.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.TaskIntervalMs }, 1)),
		key("remote.storage.s3.endpoint", "", "Shale: URL (http:// or https://) of the S3-compatible server tiered storage uses; empty: AWS S3 in remote.storage.s3.region.",
			str(func(r *RemoteStorage) *string { return &r.Endpoint })),
		key("remote.storage.s3.bucket", "", "Shale: the bucket tiered storage writes segments to; required with remote.log.storage.system.enable on a broker.",
			str(func(r *RemoteStorage) *string { return &r.Bucket })),
		key("remote.storage.s3.region", "us-east-1", "Shale: the S3 region requests are signed for.",
			str(func(r *RemoteStorage) *string { return &r.Region })),
		key("remote.storage.s3.prefix", "", "Shale: prefix of every object key tiered storage writes, so that clusters can share a bucket.",
			str(func(r *RemoteStorage) *string { return &r.Prefix })),
		key("remote.storage.s3.credentials.file", "", "Shale: AWS shared-credentials file whose [default] profile signs requests, reread from time to time so that rotated keys take effect; empty: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN from the environment.",
			str(func(r *RemoteStorage) *string { return &r.CredentialsFile })),
		key("remote.storage.s3.path.style", "false", "Shale: address buckets by path (endpoint/bucket/key), as MinIO and most self-hosted S3 servers need, rather than by virtual host.",
			boolField(func(c *Config) *bool { return &c.RemoteStorage.PathStyle })),
		key("remote.storage.s3.tls.ca.file", "", "Shale: PEM CA certificates an https endpoint's certificate must chain to; empty: the system's CAs.",
			str(func(r *RemoteStorage) *string { return &r.TLSCAFile })),
		key("remote.storage.s3.allow.http", "false", "Shale: allow a plain http:// remote.storage.s3.endpoint that is not a loopback address (segment data then crosses the network unencrypted).",
			boolField(func(c *Config) *bool { return &c.RemoteStorage.AllowHTTP })),
		key("remote.storage.cache.dir", "", "Shale: directory of the on-disk cache of chunks read from the remote log, emptied at start; empty: remote-log-cache under log.dir.",
			str(func(r *RemoteStorage) *string { return &r.CacheDir })),
		key("remote.storage.cache.size.bytes", "1073741824", "Shale: the most the remote log's read cache keeps on disk.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.CacheSizeBytes }, 1)),
		key("remote.storage.cache.chunk.bytes", "1048576", "Shale: the size of one read from the object store and the unit of the read cache; a sequential reader's next chunk is prefetched.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.CacheChunkBytes }, 4096)),
		key("remote.storage.s3.request.timeout.ms", "30000", "Shale: the longest one request to the object store may take before it is abandoned (and retried later); a slow store never holds up produce or fetch.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.RequestTimeoutMs }, 1)),
		key("remote.log.reader.threads", "10", "Goroutines that read the remote log for consumers' fetches, off the request's.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.ReaderThreads }, 1)),
		key("remote.log.reader.max.pending.tasks", "100", "The most remote log reads waiting for a reader; a fetch past it is answered UNKNOWN_SERVER_ERROR for that partition.",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.ReaderMaxPendingTasks }, 1)),
		key("remote.fetch.max.wait.ms", "500", "How long a fetch waits for a read of the remote log before answering that partition empty (the consumer asks again).",
			i64(func(c *Config) *int64 { return &c.RemoteStorage.FetchMaxWaitMs }, 1)),
	}
}

// finishRemoteStorage checks the object store's settings where a broker will use them.
// S3Endpoint is the endpoint the S3 store dials: remote.storage.s3.endpoint, or AWS S3's
// regional endpoint when it is empty.
func (r *RemoteStorage) S3Endpoint() string {
	if r.Endpoint != "" {
		return r.Endpoint
	}
	return "https://s3." + r.Region + ".amazonaws.com"
}

func (c *Config) finishRemoteStorage(fail func(key, format string, args ...any)) {
	r := c.RemoteStorage
	if !r.SystemEnable || !c.IsBroker() {
		return
	}
	if r.Bucket == "" {
		fail("remote.storage.s3.bucket", "must be set when remote.log.storage.system.enable=true")
	}
	if r.Endpoint != "" {
		u, err := url.Parse(r.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			fail("remote.storage.s3.endpoint", "%s", fmt.Sprintf("%q is not an http:// or https:// URL", r.Endpoint))
		}
	}
}
