package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// scriptSpec is the cell description a client script reads from the JSON file named by
// its last argument. Keys, values and header values are strings (the suite's content
// is ASCII); JSON null is a null key, value or header value.
type scriptSpec struct {
	// Mode is "cell" (create the topic, produce the records, read them back) or "group"
	// (consume the already filled topic through a consumer group and commit).
	Mode       string         `json:"mode"`
	Bootstrap  string         `json:"bootstrap"`
	Topic      string         `json:"topic"`
	Group      string         `json:"group"`
	Codec      string         `json:"codec"`
	Partitions int            `json:"partitions"`
	TimeoutMs  int64          `json:"timeout_ms"`
	Records    []scriptRecord `json:"records"`
}

type scriptRecord struct {
	Index   int          `json:"index"`
	Key     *string      `json:"key"`
	Value   *string      `json:"value"`
	Headers [][2]*string `json:"headers"`
	// Timestamp is the CreateTime in milliseconds; 0 lets the client stamp the record.
	Timestamp int64 `json:"timestamp"`
}

// scriptEvent is one JSON line a script prints on stdout:
//   - {"event":"produced","index":i,"partition":p,"offset":o}: record i acknowledged;
//   - {"event":"produced_all"}: every record acknowledged (ends the produce window);
//   - {"event":"consumed","partition":p,"offset":o,"key":..,"value":..,"headers":[[k,v]..],
//     "timestamp":ms,"timestamp_type":"create"|"append"|""}.
//
// Diagnostics go to stderr; a non-zero exit is a failed cell.
type scriptEvent struct {
	Event         string       `json:"event"`
	Index         int          `json:"index"`
	Partition     int32        `json:"partition"`
	Offset        int64        `json:"offset"`
	Key           *string      `json:"key"`
	Value         *string      `json:"value"`
	Headers       [][2]*string `json:"headers"`
	Timestamp     int64        `json:"timestamp"`
	TimestampType string       `json:"timestamp_type"`
}

func toNullableString(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

func fromNullableString(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}

func newScriptSpec(spec *cellSpec, mode string, timeout time.Duration) scriptSpec {
	ss := scriptSpec{
		Mode:       mode,
		Bootstrap:  target.bootstrap,
		Topic:      spec.Topic,
		Group:      spec.Group,
		Codec:      spec.Codec,
		Partitions: partitionCount,
		TimeoutMs:  timeout.Milliseconds(),
	}
	for _, r := range spec.Records {
		sr := scriptRecord{Index: r.Index, Key: toNullableString(r.Key), Value: toNullableString(r.Value)}
		for _, h := range r.Headers {
			k := h.Key
			sr.Headers = append(sr.Headers, [2]*string{&k, toNullableString(h.Value)})
		}
		if !r.Timestamp.IsZero() {
			sr.Timestamp = r.Timestamp.UnixMilli()
		}
		ss.Records = append(ss.Records, sr)
	}
	return ss
}

// scriptTimeout is how long a script may take; the context the Go side holds is a
// little longer so the script can report its own timeout first.
func scriptTimeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl) - 5*time.Second
	}
	return 45 * time.Second
}

// Script modes.
const (
	modeCell  = "cell"
	modeGroup = "group"
)

// runScript runs a client script on a cell in mode: argv plus the path of the cell's JSON
// spec.
func runScript(ctx context.Context, t *testing.T, spec *cellSpec, mode string, env []string, argv ...string) (*cellOutput, error) {
	data, err := json.Marshal(newScriptSpec(spec, mode, scriptTimeout(ctx)))
	if err != nil {
		return nil, err
	}
	specPath := filepath.Join(t.TempDir(), "cell.json")
	if err := os.WriteFile(specPath, data, 0o644); err != nil {
		return nil, err
	}
	out := &cellOutput{}
	var produceEnd time.Time
	stderr, err := runLines(ctx, env, append(argv, specPath), nil, func(line []byte) error {
		var ev scriptEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("unparseable line %q: %w", line, err)
		}
		switch ev.Event {
		case "produced":
			out.Produced = append(out.Produced, producedRecord{Index: ev.Index, Partition: ev.Partition, Offset: ev.Offset})
		case "produced_all":
			produceEnd = time.Now()
		case "consumed":
			c := consumedRecord{
				Partition:     ev.Partition,
				Offset:        ev.Offset,
				Key:           fromNullableString(ev.Key),
				Value:         fromNullableString(ev.Value),
				Timestamp:     time.UnixMilli(ev.Timestamp),
				TimestampType: ev.TimestampType,
			}
			for _, h := range ev.Headers {
				if h[0] == nil {
					return fmt.Errorf("header with a null name in %q", line)
				}
				c.Headers = append(c.Headers, header{Key: *h[0], Value: fromNullableString(h[1])})
			}
			out.Consumed = append(out.Consumed, c)
		default:
			return fmt.Errorf("unknown event in %q", line)
		}
		return nil
	}, &out.ProduceStart)
	out.ProduceEnd = produceEnd
	if err != nil {
		// What the script did before failing lets the caller check the produce side.
		return out, err
	}
	if os.Getenv(envTrace) != "" {
		t.Logf("%s stderr:\n%s", filepath.Base(argv[len(argv)-1]), stderr)
	}
	if mode == modeCell && produceEnd.IsZero() {
		return nil, errors.New("script exited without reporting produced_all")
	}
	return out, nil
}

// runLines runs argv with stdin (may be nil), handing every non-empty stdout line to
// onLine, and returns the tail of its stderr. The process is killed with its group when
// ctx ends. The error carries the tail of stderr too. started, when not nil, is set just
// before the process starts.
func runLines(ctx context.Context, env []string, argv []string, stdin io.Reader, onLine func([]byte) error, started *time.Time) (string, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 3 * time.Second
	stderr := &tailBuffer{max: 8 << 10}
	if os.Getenv(envTrace) != "" {
		stderr.max = 8 << 20 // client debug logs are long
	}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if started != nil {
		*started = time.Now()
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting %s: %w", argv[0], err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var lineErr error
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || lineErr != nil {
			continue
		}
		lineErr = onLine(line)
	}
	waitErr := cmd.Wait()
	if ctx.Err() != nil {
		waitErr = fmt.Errorf("%w (killed: %w)", waitErr, ctx.Err())
	}
	if err := errors.Join(waitErr, lineErr, sc.Err()); err != nil {
		return stderr.String(), fmt.Errorf("%s: %w: %s\nstderr:\n%s", strings.Join(shortArgv(argv), " "), err, lastLine(stderr.String()), stderr.String())
	}
	return stderr.String(), nil
}

// lastLine is the last non-empty line of s, the one a failing script ends with.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// shortArgv keeps error messages readable: script paths lose their directories.
func shortArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.HasPrefix(a, "/") && len(a) > 40 {
			a = "…/" + filepath.Base(a)
		}
		out[i] = a
	}
	return out
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
