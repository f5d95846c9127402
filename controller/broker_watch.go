package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shalelog/shale/metadata"

	pb "github.com/shalelog/shale/controller/proto"
)

// watchStallTimeout is how long a WatchMetadata stream may stay silent (controllers send
// progress every watchProgressInterval) before the broker reconnects.
const watchStallTimeout = 4 * watchProgressInterval

type imageWatcher struct{ ch chan *metadata.Image }

// Current returns the latest image the broker has received. Never nil.
func (c *BrokerClient) Current() *metadata.Image { return c.img.Load() }

// Watch returns a channel that receives the current image at once and then each new
// one, coalesced so that a slow reader sees the newest. It is closed when ctx is done or
// the client closes.
func (c *BrokerClient) Watch(ctx context.Context) <-chan *metadata.Image {
	w := &imageWatcher{ch: make(chan *metadata.Image, 1)}
	c.imgMu.Lock()
	if c.ctx.Err() != nil {
		c.imgMu.Unlock()
		close(w.ch)
		return w.ch
	}
	c.watchers[w] = struct{}{}
	w.ch <- c.img.Load()
	c.imgMu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-ctx.Done():
		case <-c.ctx.Done():
		}
		c.imgMu.Lock()
		if _, ok := c.watchers[w]; ok {
			delete(c.watchers, w)
			close(w.ch)
		}
		c.imgMu.Unlock()
	}()
	return w.ch
}

// publish makes im the cache, unless it is not newer than the cache: metadata is
// applied strictly in increasing offset order, and a broker never acts on an older image.
func (c *BrokerClient) publish(im *metadata.Image) bool {
	c.imgMu.Lock()
	defer c.imgMu.Unlock()
	if im.Offset <= c.img.Load().Offset {
		return false
	}
	c.img.Store(im)
	close(c.imgCh)
	c.imgCh = make(chan struct{})
	for w := range c.watchers {
		select {
		case w.ch <- im:
			continue
		default:
		}
		select {
		case <-w.ch: // drop the older image the reader has not taken
		default:
		}
		select {
		case w.ch <- im:
		default:
		}
	}
	return true
}

// WaitForOffset blocks until the cache reflects metadata offset off or later.
func (c *BrokerClient) WaitForOffset(ctx context.Context, off uint64) error {
	for {
		c.imgMu.Lock()
		im, ch := c.img.Load(), c.imgCh
		c.imgMu.Unlock()
		if im.Offset >= off {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.ctx.Done():
			return errors.New("controller client closed")
		}
	}
}

func (c *BrokerClient) watchLoop() {
	backoff := 20 * time.Millisecond
	wantImage := false
	for c.ctx.Err() == nil {
		addr, client, err := c.q.current()
		if err != nil {
			return
		}
		got, err := c.watchOnce(client, wantImage)
		wantImage = errors.Is(err, errBadDelta)
		if c.ctx.Err() != nil {
			return
		}
		if got {
			backoff = 20 * time.Millisecond
		}
		if hint, ok := notLeaderHint(err); ok && hint != "" && hint != addr {
			c.q.moveTo(hint)
			continue
		}
		c.log.Debug("metadata watch ended; reconnecting", "controller", addr, "err", err)
		c.q.next(addr)
		if !sleepCtx(c.ctx, backoff) {
			return
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

var (
	errBadDelta   = errors.New("metadata delta does not apply to the cache")
	errStaleImage = errors.New("controller sent a metadata image older than the cache")
)

// watchOnce follows one WatchMetadata stream until it fails or stalls. got reports
// whether anything arrived.
func (c *BrokerClient) watchOnce(client pb.ControllerClient, wantImage bool) (got bool, err error) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stall := time.AfterFunc(watchStallTimeout, cancel)
	defer stall.Stop()
	cur := c.Current()
	stream, err := client.WatchMetadata(ctx, &pb.WatchMetadataRequest{
		BrokerId: c.cfg.NodeID, FromOffset: cur.Offset, ClusterId: cur.ClusterID, WantImage: wantImage})
	if err != nil {
		return false, err
	}
	var asm imageAssembler
	for {
		upd, err := stream.Recv()
		if err != nil {
			return got, err
		}
		got = true
		stall.Reset(watchStallTimeout)
		switch u := upd.Update.(type) {
		case *pb.MetadataUpdate_Delta:
			cur := c.Current()
			// applyDelta refuses a delta that does not follow the cache or does not move
			// it forward.
			next, err := applyDelta(cur, u.Delta)
			if err == nil && !c.publish(next) {
				err = fmt.Errorf("cache moved to offset %d meanwhile", c.Current().Offset)
			}
			if err != nil {
				c.log.Warn("metadata delta does not apply; asking for a complete image", "err", err)
				return got, fmt.Errorf("%w: %w", errBadDelta, err)
			}
		case *pb.MetadataUpdate_Image:
			im, err := asm.add(u.Image)
			if err != nil {
				return got, fmt.Errorf("%w: %w", errBadDelta, err)
			}
			if im == nil {
				break
			}
			old := c.Current()
			switch {
			case im.Offset == old.Offset:
				// The cache already holds this offset (a reconnect that asked for an
				// image): nothing to apply.
				c.log.Debug("metadata image at the cache's offset ignored", "offset", im.Offset)
			case im.Offset < old.Offset || !c.publish(im):
				c.log.Error("metadata image older than the cache refused", "image", im.Offset, "cache", old.Offset,
					"image_cluster_id", im.ClusterID, "cache_cluster_id", old.ClusterID)
				return got, fmt.Errorf("%w: image at offset %d, cache at %d", errStaleImage, im.Offset, old.Offset)
			}
		case *pb.MetadataUpdate_Progress:
		}
		if c.isFenced() {
			c.kickHeartbeat()
		}
	}
}
