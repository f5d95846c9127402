package controller

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/shalelog/shale/internal/testutil"
)

func TestRaftLoggerRendersFormat(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", []string{"a", "b"}))
	out := buf.String()
	if !strings.Contains(out, `servers="[a b]"`) {
		t.Fatalf("Format value not rendered: %s", out)
	}
	if !strings.Contains(out, "component=raft") || !strings.Contains(out, "index=1") {
		t.Fatalf("missing attributes: %s", out)
	}
}

// A snapshot asked for with nothing new (Close asks for one) is not an error: a clean
// start and stop of an idle controller logs no error.
func TestIdleRestartLogsNoError(t *testing.T) {
	var buf testutil.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	q := newTestQuorum(t, 1, func(c *Config) { c.Logger = lg })
	q.leader()
	q.stop(0)
	q.restart(0)
	q.leader()
	q.stop(0)
	q.restart(0)
	q.stop(0)
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("logged: %s", line)
		}
	}
}

func TestRaftLoggerNothingToSnapshotIsNotAnError(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Error("failed to take snapshot", "error", raft.ErrNothingNewToSnapshot)
	l.Error("failed to take snapshot", "error", errors.New("disk full"))
	if out := buf.String(); strings.Contains(out, "nothing new") || !strings.Contains(out, "disk full") {
		t.Fatalf("logged: %s", out)
	}
}
