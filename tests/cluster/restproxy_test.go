package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
)

// proxyJSON sends a request to a REST proxy and decodes its JSON answer.
func proxyJSON(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		js, _ := json.Marshal(body)
		rd = bytes.NewReader(js)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out := map[string]any{}
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Every broker of a cluster with dedicated controllers serves the REST proxy: a topic
// created through one broker's proxy, records produced through another's to every
// partition (their leaders on all three brokers), read back through the third's; and
// a producer through a proxy keeps going when a partition's leader is killed.
func TestRESTProxyOnEveryBroker(t *testing.T) {
	c := newCluster(t)
	// Brokers restarted with a proxy each (the harness gives every node the same flags).
	proxies := map[int32]string{}
	for _, b := range c.brokers {
		proxies[b.id] = fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		b.terminate()
		b.args = append(b.args, "--rest.proxy.listener="+proxies[b.id])
		b.start()
		c.waitBrokerReady(b)
	}
	base := func(id int32) string { return "http://" + proxies[id] + "/v3/clusters" }
	var clusterID string
	testutil.Eventually(t, 30*time.Second, "every proxy names the same cluster", func() bool {
		ids := map[any]bool{}
		for id := range proxies {
			st, body := proxyJSON(t, "GET", base(id), nil)
			if st != 200 || len(body["data"].([]any)) != 1 {
				return false
			}
			ids[body["data"].([]any)[0].(map[string]any)["cluster_id"]] = true
			clusterID, _ = body["data"].([]any)[0].(map[string]any)["cluster_id"].(string)
		}
		return len(ids) == 1 && clusterID != ""
	})
	st, body := proxyJSON(t, "POST", base(4)+"/"+clusterID+"/topics", map[string]any{"topic_name": "spread", "partitions_count": 3, "replication_factor": 3})
	if st != 201 {
		t.Fatalf("create through broker 4: %d %v", st, body)
	}
	c.waitFullISR("spread", 30*time.Second)
	leaders := map[string]bool{}
	for p := range 3 {
		st, body := proxyJSON(t, "GET", fmt.Sprintf("%s/%s/topics/spread/partitions/%d", base(6), clusterID, p), nil)
		if st != 200 {
			t.Fatalf("partition %d through broker 6: %d %v", p, st, body)
		}
		link := body["leader"].(map[string]any)["related"].(string)
		leaders[link[strings.LastIndex(link, "/")+1:]] = true
	}
	for p := range 3 {
		st, body := proxyJSON(t, "POST", base(5)+"/"+clusterID+"/topics/spread/records",
			map[string]any{"partition_id": p, "value": map[string]any{"type": "STRING", "data": fmt.Sprintf("to %d", p)}})
		if st != 200 || body["partition_id"] != float64(p) || body["offset"] != float64(0) {
			t.Fatalf("produce to %d through broker 5: %d %v", p, st, body)
		}
	}
	for p := range 3 {
		st, body := proxyJSON(t, "GET", fmt.Sprintf("%s/%s/topics/spread/partitions/%d/records?value_format=string", base(6), clusterID, p), nil)
		data, _ := body["data"].([]any)
		if st != 200 || len(data) != 1 || data[0].(map[string]any)["value"].(map[string]any)["data"] != fmt.Sprintf("to %d", p) {
			t.Fatalf("read %d through broker 6: %d %v", p, st, body)
		}
	}
	t.Logf("leaders of spread's partitions: %v", leaders)

	// Kill the leader of partition 0 (not broker 5, whose proxy produces): the proxy's
	// producer finds the new leader, as a Kafka client does.
	st, body = proxyJSON(t, "GET", base(5)+"/"+clusterID+"/topics/spread/partitions/0", nil)
	link := body["leader"].(map[string]any)["related"].(string)
	var victim int32
	fmt.Sscan(link[strings.LastIndex(link, "/")+1:], &victim)
	via := int32(5)
	if victim == 5 {
		via = 4
	}
	c.broker(victim).kill9()
	st, body = proxyJSON(t, "POST", base(via)+"/"+clusterID+"/topics/spread/records",
		map[string]any{"partition_id": 0, "value": map[string]any{"type": "STRING", "data": "after the leader died"}})
	if st != 200 || body["offset"] != float64(1) {
		t.Fatalf("produce after killing broker %d through broker %d: %d %v", victim, via, st, body)
	}
	st, body = proxyJSON(t, "GET", base(via)+"/"+clusterID+"/topics/spread/partitions/0/records?value_format=string", nil)
	if data, _ := body["data"].([]any); st != 200 || len(data) != 2 || data[1].(map[string]any)["value"].(map[string]any)["data"] != "after the leader died" {
		t.Fatalf("read partition 0 after failover: %d %v", st, body)
	}
}
