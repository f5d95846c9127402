package cluster

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

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
}
