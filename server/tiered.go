package server

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/shalelog/shale/server/config"
	"github.com/shalelog/shale/tiered/objstore/s3"
	"github.com/shalelog/shale/tiered/remotelog"
)

// remoteStorage builds tiered storage's object store and the on-disk chunk cache that
// remote reads go through, when remote.log.storage.system.enable is on; both nil
// otherwise. The cache is registered on the node's /metrics and closed by node.close,
// after the broker whose reads use it.
func (n *node) remoteStorage(cfg *config.Config) (*s3.Store, *remotelog.ChunkCache, error) {
	r := cfg.RemoteStorage
	if !r.SystemEnable {
		return nil, nil, nil
	}
	store, err := s3.New(s3.Config{
		Endpoint:        r.Endpoint,
		Bucket:          r.Bucket,
		Region:          r.Region,
		Prefix:          r.Prefix,
		CredentialsFile: r.CredentialsFile,
		PathStyle:       r.PathStyle,
		CAFile:          r.TLSCAFile,
		AllowHTTP:       r.AllowHTTP,
		Timeout:         time.Duration(r.RequestTimeoutMs) * time.Millisecond,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("remote.storage.s3: %w", err)
	}
	dir := r.CacheDir
	if dir == "" {
		dir = filepath.Join(cfg.LogDir, "remote-log-cache")
	}
	cache, err := remotelog.NewChunkCache(store, remotelog.CacheConfig{
		Dir:        dir,
		ChunkBytes: int(r.CacheChunkBytes),
		MaxBytes:   r.CacheSizeBytes,
		Logger:     n.lg,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("remote.storage.cache.dir: %w", err)
	}
	if err := n.reg.Register(cache); err != nil {
		cache.Close()
		return nil, nil, fmt.Errorf("remote log cache metrics: %w", err)
	}
	return store, cache, nil
}
