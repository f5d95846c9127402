package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/shalelog/shale/server"
	"github.com/shalelog/shale/server/config"
)

func serveCommand(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	cfg, err := config.Load(args, environ)
	if errors.Is(err, config.ErrHelp) {
		config.Usage(stdout)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "shale serve: invalid configuration:\n%v\n", err)
		return exitUsage
	}
	// The process's one logger: every package logs through slog.Default.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(logger)
	if err := server.Run(ctx, cfg); err != nil {
		logger.Error("shale serve failed", "err", err)
		return exitFailed
	}
	return exitOK
}
