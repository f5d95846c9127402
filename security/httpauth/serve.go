package httpauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves one of the broker's HTTP APIs on ln until ctx is done, then shuts it down
// gracefully (requests in flight get up to 5 s); api names it in the error. The schema
// registry and the REST proxy share it so that both stop the same way.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lg *slog.Logger, api string) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ErrorLog:    slog.NewLogLogger(lg.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
		case <-done:
		}
	}()
	defer close(done)
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s listener: %w", api, err)
	}
	return nil
}
