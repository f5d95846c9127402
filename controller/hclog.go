package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// raftLogger adapts slog to the hclog.Logger that hashicorp/raft logs through, so that
// Raft's messages land in the process's structured log with the right levels.
type raftLogger struct {
	l    *slog.Logger
	name string
	args []any
}

var _ hclog.Logger = (*raftLogger)(nil)

func newRaftLogger(l *slog.Logger) *raftLogger { return &raftLogger{l: l, name: "raft"} }

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (r *raftLogger) Log(level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if lvl > slog.LevelDebug && nothingToSnapshot(args) {
		// Raft logs a snapshot asked for with nothing applied since the last one (as
		// Close asks) as a failure; it is the normal answer.
		lvl = slog.LevelDebug
	}
	if !r.l.Enabled(context.Background(), lvl) {
		return
	}
	all := make([]any, 0, len(r.args)+len(args)+2)
	all = append(all, "component", r.name)
	all = append(all, r.args...)
	all = append(all, args...)
	r.l.Log(context.Background(), lvl, msg, renderFormats(all)...)
}

func nothingToSnapshot(kv []any) bool {
	for _, v := range kv {
		if err, ok := v.(error); ok && errors.Is(err, raft.ErrNothingNewToSnapshot) {
			return true
		}
	}
	return false
}

// renderFormats turns hclog.Format values (a printf format and its operands, which Raft
// uses for e.g. its initial configuration) into the string hclog would have printed;
// slog would otherwise show the raw slice.
func renderFormats(kv []any) []any {
	for i := 1; i < len(kv); i += 2 {
		f, ok := kv[i].(hclog.Format)
		if !ok || len(f) == 0 {
			continue
		}
		if format, ok := f[0].(string); ok {
			kv[i] = fmt.Sprintf(format, f[1:]...)
		} else {
			kv[i] = fmt.Sprint(f...)
		}
	}
	return kv
}

func (r *raftLogger) Trace(msg string, args ...any) { r.Log(hclog.Trace, msg, args...) }
func (r *raftLogger) Debug(msg string, args ...any) { r.Log(hclog.Debug, msg, args...) }
func (r *raftLogger) Info(msg string, args ...any)  { r.Log(hclog.Info, msg, args...) }
func (r *raftLogger) Warn(msg string, args ...any)  { r.Log(hclog.Warn, msg, args...) }
func (r *raftLogger) Error(msg string, args ...any) { r.Log(hclog.Error, msg, args...) }

func (r *raftLogger) enabled(l slog.Level) bool { return r.l.Enabled(context.Background(), l) }
func (r *raftLogger) IsTrace() bool             { return r.enabled(slog.LevelDebug) }
func (r *raftLogger) IsDebug() bool             { return r.enabled(slog.LevelDebug) }
func (r *raftLogger) IsInfo() bool              { return r.enabled(slog.LevelInfo) }
func (r *raftLogger) IsWarn() bool              { return r.enabled(slog.LevelWarn) }
func (r *raftLogger) IsError() bool             { return r.enabled(slog.LevelError) }
func (r *raftLogger) ImpliedArgs() []any        { return r.args }
func (r *raftLogger) Name() string              { return r.name }

func (r *raftLogger) With(args ...any) hclog.Logger {
	c := *r
	c.args = append(append([]any(nil), r.args...), args...)
	return &c
}

func (r *raftLogger) Named(name string) hclog.Logger {
	c := *r
	c.name = r.name + "." + name
	return &c
}

func (r *raftLogger) ResetNamed(name string) hclog.Logger {
	c := *r
	c.name = name
	return &c
}

// SetLevel is a no-op: the slog handler decides what is logged.
func (r *raftLogger) SetLevel(hclog.Level) {}

func (r *raftLogger) GetLevel() hclog.Level {
	switch {
	case r.IsDebug():
		return hclog.Debug
	case r.IsInfo():
		return hclog.Info
	case r.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (r *raftLogger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(r.StandardWriter(opts), "", 0)
}

func (r *raftLogger) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return stdWriter{r}
}

// stdWriter logs each line written by a standard-library logger, at the level its
// "[LEVEL]" prefix names when it has one.
type stdWriter struct{ r *raftLogger }

func (w stdWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := hclog.Info
	for prefix, l := range map[string]hclog.Level{"[ERR]": hclog.Error, "[ERROR]": hclog.Error,
		"[WARN]": hclog.Warn, "[DEBUG]": hclog.Debug, "[TRACE]": hclog.Trace, "[INFO]": hclog.Info} {
		if strings.HasPrefix(line, prefix) {
			level, line = l, strings.TrimSpace(strings.TrimPrefix(line, prefix))
			break
		}
	}
	w.r.Log(level, line)
	return len(p), nil
}
