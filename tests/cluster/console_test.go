package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/shalelog/shale/internal/testutil"
)

// TestConsoleBrokerKilled: a broker killed with SIGKILL (no controlled shutdown) shows on
// another broker's console as fenced or down, and its partitions as under-replicated,
// within a few seconds: the session timeout (2 s here) and a sample.
func TestConsoleBrokerKilled(t *testing.T) {
	httpAddr := map[int32]string{}
	c := newClusterWith(t, func(id int32) []string {
		httpAddr[id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		return []string{"--http.listener=" + httpAddr[id], "--replica.lag.time.max.ms=2000"}
	})
	createTopic(t, c.brokers[0].addr, newTopic("spread", 6, 3))
	hc := &http.Client{Timeout: 10 * time.Second}
	overview := func() string {
		resp, err := hc.Get("http://" + httpAddr[4] + "/")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	var body string
	testutil.Eventually(t, 30*time.Second, "broker 4's overview with every broker live", func() bool {
		body = overview()
		return strings.Contains(body, `data-broker="4"`) && strings.Contains(body, `data-broker="5"`) && strings.Contains(body, `data-broker="6"`) &&
			!strings.Contains(body, "fenced or down") && strings.Contains(body, "Under-replicated partitions (0)")
	})
	c.broker(6).kill9()
	killed := time.Now()
	down := regexp.MustCompile(`(?s)data-broker="6">.{0,300}?fenced or down`)
	testutil.Eventually(t, 3*sessionTimeout+10*time.Second, "broker 6 shown fenced and its partitions under-replicated", func() bool {
		body = overview()
		return down.MatchString(body) && strings.Contains(body, "Under-replicated partitions (6)")
	})
	t.Logf("broker 6 shown fenced or down, 6 partitions under-replicated, %s after SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	inChromium(t, "http://"+httpAddr[4]+"/")
}

// inChromium opens the overview in Debian's chromium (when installed), fails on any
// error the page causes, checks that it shows broker 6 fenced and the six partitions
// under-replicated without 6 in their ISR, and leaves a screenshot in
// $SHALE_TEST_ARTIFACTS/console (the server package's TestConsoleInBrowser does the
// rest of the console's pages, on in-process nodes).
func inChromium(t *testing.T, url string) {
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Log("chromium is not installed (tests/deps.sh installs it): the overview was checked over HTTP only")
		return
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	var mu sync.Mutex
	var errs []string
	chromedp.ListenTarget(bctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError || ev.Type == runtime.APITypeAssert {
				msg = "console." + string(ev.Type)
				for _, a := range ev.Args {
					msg += " " + string(a.Value)
				}
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.LevelError {
				msg = "log: " + ev.Entry.Text + " " + ev.Entry.URL
			}
		}
		if msg != "" {
			mu.Lock()
			errs = append(errs, msg)
			mu.Unlock()
		}
	})
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	var view struct {
		State string     `json:"state"`
		URP   [][]string `json:"urp"`
	}
	var shot []byte
	if err := chromedp.Run(ctx, cdplog.Enable(), runtime.Enable(), chromedp.Navigate(url), chromedp.WaitVisible("main h1", chromedp.ByQuery),
		chromedp.Evaluate(`({state: (document.querySelector('tr[data-broker="6"] .badge') || {}).textContent || "",
			urp: Array.from(document.querySelectorAll("#urp tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent))})`, &view),
		chromedp.FullScreenshot(&shot, 100)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	time.Sleep(100 * time.Millisecond) // late console events
	mu.Lock()
	if len(errs) > 0 {
		t.Errorf("the overview caused errors in chromium:\n%s", strings.Join(errs, "\n"))
	}
	mu.Unlock()
	if view.State != "fenced or down" || len(view.URP) != 6 {
		t.Errorf("chromium shows broker 6 %q and %d partitions under-replicated, want fenced or down and 6", view.State, len(view.URP))
	}
	for _, row := range view.URP { // topic, partition, leader, replicas, ISR
		if len(row) != 5 || row[0] != "spread" || !strings.Contains(row[3], "6") || strings.Contains(row[4], "6") {
			t.Errorf("an under-replicated partition shows as %q", row)
		}
	}
	dir := t.TempDir()
	if a := os.Getenv("SHALE_TEST_ARTIFACTS"); a != "" {
		dir = filepath.Join(a, "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overview-broker-killed.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
