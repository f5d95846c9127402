package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shalelog/shale/internal/testutil"
)

// TestSchemaRegistryFailover registers schemas concurrently through the schema registry
// listeners of all three brokers while the active controller and then a broker are
// killed with SIGKILL and restarted. Afterwards every broker must serve the same
// registry, and:
//   - every id a client was given is served by every broker (GET /schemas/ids/{id})
//     with the schema the client registered;
//   - no id belongs to two different schemas, and no schema has two ids;
//   - a schema appears at most once per subject, and versions are 1..n;
//   - nothing appears that no client sent.
//
// A request that timed out, lost its connection or got a 5xx may or may not have been
// applied: its schema may be in the registry or not, but never twice. Its client retries
// it (through the next broker), as clients do, and a retry must find the same id.
func TestSchemaRegistryFailover(t *testing.T) {
	regPorts := map[int32]int{}
	for id := int32(4); id <= 6; id++ {
		regPorts[id] = testutil.FreePort(t)
	}
	c := newClusterWith(t, func(id int32) []string {
		return []string{fmt.Sprintf("--schema.registry.listener=127.0.0.1:%d", regPorts[id])}
	})
	var urls []string
	for id := int32(4); id <= 6; id++ {
		urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", regPorts[id]))
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	t.Cleanup(hc.CloseIdleConnections)
	for _, u := range urls {
		waitRegistry(t, hc, u)
	}

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	log := &attemptLog{}
	var wg sync.WaitGroup
	const workersPerBroker = 2
	for w := range workersPerBroker * len(urls) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			registerLoop(ctx, hc, urls, w, log)
		}()
	}

	phase := func(name string, d time.Duration) {
		time.Sleep(d)
		ok, maybe, refused := log.counts()
		t.Logf("%s: %d registered, %d unknown outcomes, %d refused so far", name, ok, maybe, refused)
	}
	phase("steady", 2*time.Second)
	ci := c.activeController(10 * time.Second)
	ctl := c.controllers[ci]
	ctl.kill9()
	t.Logf("killed active controller %d", ctl.id)
	phase("controller down", 3*time.Second)
	ctl.start()
	c.activeController(30 * time.Second)
	okBefore, _, _ := log.counts()
	phase("controller back", 2*time.Second)
	b := c.broker(5)
	b.kill9()
	t.Logf("killed broker %d", b.id)
	phase("broker down", 2*time.Second)
	b.start()
	c.waitBrokerReady(b)
	waitRegistry(t, hc, urls[1])
	phase("broker back", 2*time.Second)
	stop()
	wg.Wait()
	ok, maybe, refused := log.counts()
	if ok <= okBefore {
		t.Errorf("no registration succeeded after the controller came back (%d before, %d at the end)", okBefore, ok)
	}
	if refused > 0 {
		t.Errorf("%d registrations refused with a 4xx; first: %s", refused, log.first("refused"))
	}
	if maybe > 0 {
		t.Logf("first request without an answer: %s", log.first("maybe"))
	}

	// Every broker converges on one registry.
	var states []registryState
	testutil.Eventually(t, 30*time.Second, "the same registry on every broker", func() bool {
		states = states[:0]
		for _, u := range urls {
			s, err := readRegistry(hc, u)
			if err != nil {
				t.Logf("reading %s: %v", u, err)
				return false
			}
			states = append(states, s)
		}
		return reflect.DeepEqual(states[0], states[1]) && reflect.DeepEqual(states[0], states[2])
	})
	state := states[0]

	idSchema := map[int]string{}
	schemaID := map[string]int{}
	versions := 0
	for subject, vs := range state {
		seen := map[string]int{}
		for i, v := range vs {
			versions++
			if v.Version != i+1 {
				t.Errorf("%s: versions %v are not 1..%d", subject, versionNumbers(vs), len(vs))
				break
			}
			if prev, dup := seen[v.Schema]; dup {
				t.Errorf("%s: versions %d and %d hold the same schema %s", subject, prev, v.Version, v.Schema)
			}
			seen[v.Schema] = v.Version
			if s, ok := idSchema[v.ID]; ok && s != v.Schema {
				t.Errorf("id %d given to two schemas: %s and %s", v.ID, s, v.Schema)
			}
			idSchema[v.ID] = v.Schema
			if id, ok := schemaID[v.Schema]; ok && id != v.ID {
				t.Errorf("schema %s has two ids, %d and %d", v.Schema, id, v.ID)
			}
			schemaID[v.Schema] = v.ID
			if !log.sent(subject, v.Schema) {
				t.Errorf("%s version %d (%s) was never sent by a client", subject, v.Version, v.Schema)
			}
		}
	}

	// Every id a client was given, on every broker.
	given := log.given()
	for _, a := range given {
		vs := state[a.subject]
		idx := slices.IndexFunc(vs, func(v registryVersion) bool { return v.Schema == a.schema })
		if idx < 0 || vs[idx].ID != a.id {
			t.Errorf("client was given id %d for %s under %s; the registry has %+v", a.id, a.schema, a.subject, vs)
		}
	}
	ids := map[int]string{}
	for _, a := range given {
		if s, ok := ids[a.id]; ok && s != a.schema {
			t.Errorf("clients were given id %d for two schemas: %s and %s", a.id, s, a.schema)
		}
		ids[a.id] = a.schema
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		for _, u := range urls {
			var got struct {
				Schema string `json:"schema"`
			}
			if status, err := getJSON(hc, fmt.Sprintf("%s/schemas/ids/%d", u, id), &got); err != nil || status != 200 {
				t.Errorf("GET %s/schemas/ids/%d: %d %v", u, id, status, err)
			} else if got.Schema != ids[id] {
				t.Errorf("GET %s/schemas/ids/%d: %s, the client registered %s", u, id, got.Schema, ids[id])
			}
		}
	}
	if len(given) == 0 {
		t.Fatal("no registration succeeded")
	}
	t.Logf("%d registrations answered with an id, %d with no answer (timeout, connection lost, 5xx); the registry holds %d subjects, %d versions, %d ids, the same on all brokers",
		ok, maybe, len(state), versions, len(idSchema))
}

// registerLoop is one client: it registers a new schema at a time, under one of four
// subjects, through its own broker; every fifth attempt sends again a schema it sent
// three attempts before, under another subject (which must reuse that schema's id). A
// request with no answer is retried through the next broker until it gets one.
func registerLoop(ctx context.Context, hc *http.Client, urls []string, w int, log *attemptLog) {
	home := w % len(urls)
	for n := 0; ctx.Err() == nil; n++ {
		k := n
		if n%5 == 4 {
			k = n - 3
		}
		schema := fmt.Sprintf(`{"type":"record","name":"R","fields":[{"name":"f_%d_%d","type":"string","default":""}]}`, w, k)
		subject := fmt.Sprintf("s%d", (w+n)%4)
		for try := 0; ctx.Err() == nil; try++ {
			u := urls[(home+try)%len(urls)]
			id, status, err := register(ctx, hc, u, subject, schema)
			switch {
			case err == nil && status == 200:
				log.add(attempt{subject: subject, schema: schema, id: id, outcome: "ok"})
			case err != nil || status >= 500:
				log.add(attempt{subject: subject, schema: schema, outcome: "maybe", detail: fmt.Sprintf("%s: %d %v", u, status, err)})
				time.Sleep(50 * time.Millisecond)
				continue
			default:
				log.add(attempt{subject: subject, schema: schema, outcome: "refused", detail: fmt.Sprintf("%s: %d %v", u, status, err)})
			}
			break
		}
	}
}

func register(ctx context.Context, hc *http.Client, base, subject, schema string) (int, int, error) {
	body, _ := json.Marshal(map[string]string{"schema": schema})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/subjects/"+url.PathEscape(subject)+"/versions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, resp.StatusCode, err
	}
	if resp.StatusCode != 200 {
		return 0, resp.StatusCode, errors.New(strings.TrimSpace(string(data)))
	}
	var out struct {
		ID int `json:"id"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.ID <= 0 {
		return 0, resp.StatusCode, fmt.Errorf("answer %s: %v", data, err)
	}
	return out.ID, 200, nil
}

type attempt struct {
	subject, schema string
	id              int
	outcome         string // ok, maybe, refused
	detail          string
}

// attemptLog is what every client sent and was told.
type attemptLog struct {
	mu sync.Mutex
	a  []attempt
}

func (l *attemptLog) add(a attempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.a = append(l.a, a)
}

func (l *attemptLog) counts() (ok, maybe, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.a {
		switch a.outcome {
		case "ok":
			ok++
		case "maybe":
			maybe++
		default:
			refused++
		}
	}
	return
}

func (l *attemptLog) first(outcome string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.a {
		if a.outcome == outcome {
			return a.subject + " " + a.detail
		}
	}
	return ""
}

func (l *attemptLog) sent(subject, schema string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.a, func(a attempt) bool { return a.subject == subject && a.schema == schema })
}

func (l *attemptLog) given() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []attempt
	for _, a := range l.a {
		if a.outcome == "ok" {
			out = append(out, a)
		}
	}
	return out
}

type registryVersion struct {
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Schema  string `json:"schema"`
}

// registryState is one broker's registry: each subject's versions, oldest first.
type registryState map[string][]registryVersion

func versionNumbers(vs []registryVersion) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = v.Version
	}
	return out
}

func readRegistry(hc *http.Client, base string) (registryState, error) {
	var subjects []string
	if status, err := getJSON(hc, base+"/subjects", &subjects); err != nil || status != 200 {
		return nil, fmt.Errorf("GET /subjects: %d %v", status, err)
	}
	state := registryState{}
	for _, s := range subjects {
		var vs []int
		path := base + "/subjects/" + url.PathEscape(s) + "/versions"
		if status, err := getJSON(hc, path, &vs); err != nil || status != 200 {
			return nil, fmt.Errorf("GET %s: %d %v", path, status, err)
		}
		for _, v := range vs {
			var rv registryVersion
			p := fmt.Sprintf("%s/%d", path, v)
			if status, err := getJSON(hc, p, &rv); err != nil || status != 200 {
				return nil, fmt.Errorf("GET %s: %d %v", p, status, err)
			}
			state[s] = append(state[s], rv)
		}
	}
	return state, nil
}

func getJSON(hc *http.Client, u string, out any) (int, error) {
	resp, err := hc.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode != 200 {
		return resp.StatusCode, errors.New(strings.TrimSpace(string(data)))
	}
	return 200, json.Unmarshal(data, out)
}

// waitRegistry waits until a broker's registry answers.
func waitRegistry(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "schema registry at "+base, func() bool {
		var subjects []string
		status, err := getJSON(hc, base+"/subjects", &subjects)
		return err == nil && status == 200
	})
}
