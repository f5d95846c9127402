package controller

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
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
