package txn

import (
	"log/slog"
	"time"

	"github.com/shalelog/shale/coordinator/timer"
)

// Config configures a Coordinator. Zero values take Kafka's defaults.
type Config struct {
	// NodeID is this broker's node.id.
	NodeID int32
	// MaxTimeout is transaction.max.timeout.ms (default 15 minutes): an InitProducerId
	// asking for a longer transaction timeout gets INVALID_TRANSACTION_TIMEOUT.
	MaxTimeout time.Duration
	// AbortTimedOutInterval is
	// transaction.abort.timed.out.transaction.cleanup.interval.ms (default 10s): how
	// often transactions open longer than their timeout are aborted.
	AbortTimedOutInterval time.Duration
	// IDExpiration is transactional.id.expiration.ms (default 7 days): a transactional id
	// with no transaction for this long is forgotten.
	IDExpiration time.Duration
	// RemoveExpiredInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms (default 1 hour).
	RemoveExpiredInterval time.Duration
	// MarkerRetryBackoff is how long a marker that failed waits before it is sent again
	// (default 100ms).
	MarkerRetryBackoff time.Duration
	// CompletionWait bounds how long a request waits for the previous transaction of
	// its id to complete before it is answered CONCURRENT_TRANSACTIONS (default 5s: well
	// under the clients' request timeouts, and long enough for markers on a loaded
	// broker).
	CompletionWait time.Duration
	// StoreTimeout bounds each call to the controller made without a client's context
	// (loads, completions, timeouts). Default 30s.
	StoreTimeout time.Duration
	Logger       *slog.Logger
	// Now is the clock for transaction timestamps; nil is time.Now.
	Now func() time.Time
	// Clock times the periodic sweeps; nil is the wall clock.
	Clock timer.Clock
}

func (c Config) withDefaults() Config {
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 15 * time.Minute
	}
	if c.AbortTimedOutInterval <= 0 {
		c.AbortTimedOutInterval = 10 * time.Second
	}
	if c.IDExpiration <= 0 {
		c.IDExpiration = 7 * 24 * time.Hour
	}
	if c.RemoveExpiredInterval <= 0 {
		c.RemoveExpiredInterval = time.Hour
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = 100 * time.Millisecond
	}
	if c.CompletionWait <= 0 {
		c.CompletionWait = 5 * time.Second
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
