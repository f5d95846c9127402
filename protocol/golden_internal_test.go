package protocol

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/shalelog/shale/coordinator/group"
	"github.com/shalelog/shale/coordinator/txn"
	"github.com/shalelog/shale/metadata"
	"github.com/shalelog/shale/protocol/telemetry"
	"github.com/shalelog/shale/replication/share"
)

// The golden files pin what the broker says on the wire where no client test looks
// closely: the response that refuses a request of each API at each version, and the API
// versions advertised for each set of broker services. Regenerate them with
//
//	go test ./protocol -run TestGolden -update
//
// and read the diff: a change there is a change in what clients see.
var updateGolden = flag.Bool("update", false, "rewrite protocol/testdata/golden from the current code")

const goldenDir = "testdata/golden"

// goldenMeta is a metadata store that says it keeps everything a broker can serve APIs
// for; no method is called while a server is built or asked for its API versions.
type goldenMeta struct {
	metadata.Store
	metadata.QuorumAdmin
	metadata.ClientMetricsStore
	metadata.ScramStore
}

// goldenServers are the broker setups whose advertised APIs differ: every service, none
// of the optional ones, a group coordinator without a transaction coordinator (the
// transaction APIs need both), and a store that keeps everything on a broker without
// client telemetry, coordinators or groups but with share partitions.
func goldenServers() []struct {
	name string
	srv  *Server
} {
	full := Config{Telemetry: &telemetry.Manager{}}
	return []struct {
		name string
		srv  *Server
	}{
		{"full", NewServer(full, Deps{Meta: goldenMeta{}, Groups: &group.Coordinator{}, Txn: &txn.Coordinator{}, Shares: &share.Manager{}})},
		{"bare", NewServer(Config{}, Deps{Meta: struct{ metadata.Store }{}})},
		{"groups-no-txn", NewServer(Config{}, Deps{Meta: struct{ metadata.Store }{}, Groups: &group.Coordinator{}, Txn: nil})},
		{"stores-no-telemetry-shares-only", NewServer(Config{}, Deps{Meta: goldenMeta{}, Shares: &share.Manager{}})},
	}
}

// checkGolden compares got with the golden file name, or rewrites it under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *updateGolden {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(want) != got {
		wl, gl := strings.Split(string(want), "\n"), strings.Split(got, "\n")
		for i := 0; i < len(wl) || i < len(gl); i++ {
			var w, g string
			if i < len(wl) {
				w = wl[i]
			}
			if i < len(gl) {
				g = gl[i]
			}
			if w != g {
				t.Fatalf("%s differs at line %d:\nwant %s\ngot  %s", path, i+1, w, g)
			}
		}
		t.Fatalf("%s differs", path)
	}
}

// TestGoldenApiVersions: the keys and version ranges advertised, per broker setup, and
// the encoded ApiVersions v3 response that carries them.
func TestGoldenApiVersions(t *testing.T) {
	for _, gs := range goldenServers() {
		t.Run(gs.name, func(t *testing.T) {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 3
			req.ClientSoftwareName, req.ClientSoftwareVersion = "golden", "1.0"
			res := gs.srv.handleApiVersions(context.Background(), &Request{Key: req.Key(), Version: req.Version, Kreq: req})
			resp := res.Resp.(*kmsg.ApiVersionsResponse)
			var b strings.Builder
			fmt.Fprintf(&b, "# key name min max\n")
			for _, k := range resp.ApiKeys {
				fmt.Fprintf(&b, "%d %s %d %d\n", k.ApiKey, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
			}
			fmt.Fprintf(&b, "# ApiVersions v%d response, error %d\n%s\n", resp.Version, resp.ErrorCode, hex.EncodeToString(resp.AppendTo(nil)))
			checkGolden(t, "api_versions_"+gs.name+".txt", b.String())
		})
	}
}

// TestGoldenErrorResponses: for every API the fullest broker serves, at every version
// kmsg knows (those outside the advertised range are what dispatch refuses), the response that refuses a request of it
// with UNSUPPORTED_VERSION (what dispatch sends; a handler panic sends the same builder's
// response with UNKNOWN_SERVER_ERROR), or "nil" where the connection is closed instead.
// The requests are filled by filledRequest so that every topic, partition, group and
// resource they name has something to be echoed.
func TestGoldenErrorResponses(t *testing.T) {
	srv := goldenServers()[0].srv
	for _, k := range srv.supportedKeys() {
		kreq := kmsg.RequestForKey(k.ApiKey)
		name := fmt.Sprintf("%02d_%s", k.ApiKey, kmsg.NameForKey(k.ApiKey))
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			fmt.Fprintf(&b, "# %s versions %d-%d (kmsg knows up to %d), code %d\n", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, kreq.MaxVersion(), codeUnsupportedVersion)
			for v := int16(0); v <= kreq.MaxVersion(); v++ {
				mark := ""
				if v < k.MinVersion || v > k.MaxVersion {
					mark = " (not advertised)"
				}
				req := filledRequest(k.ApiKey, v)
				resp := errorResponse(req, codeUnsupportedVersion)
				if resp == nil {
					fmt.Fprintf(&b, "v%d%s nil\n", v, mark)
					continue
				}
				fmt.Fprintf(&b, "v%d%s resp-v%d flexible=%t %s\n", v, mark, resp.GetVersion(), resp.IsFlexible(), hex.EncodeToString(resp.AppendTo(nil)))
			}
			checkGolden(t, "error_"+name+".txt", b.String())
		})
	}
	// Keys the broker never serves: a request of one closes the connection unless a
	// builder answers it.
	served := map[int16]bool{}
	for _, k := range srv.supportedKeys() {
		served[k.ApiKey] = true
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# keys kmsg knows that no broker setup serves: whether errorResponse answers them\n")
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		kreq := kmsg.RequestForKey(key)
		if kreq == nil || served[key] {
			continue
		}
		answered := errorResponse(filledRequest(key, kreq.MaxVersion()), codeUnsupportedVersion) != nil
		fmt.Fprintf(&b, "%d %s answered=%t\n", key, kmsg.NameForKey(key), answered)
	}
	checkGolden(t, "error_unserved.txt", b.String())
}

// filledRequest is a request of key at version v with every field set, deterministically:
// each list holds two elements, each number is the next of a counter, each string is its
// field's name.
func filledRequest(key, v int16) kmsg.Request {
	req := kmsg.RequestForKey(key)
	n := 0
	fillValue(reflect.ValueOf(req).Elem(), "", &n)
	req.SetVersion(v)
	return req
}

var tagsType = reflect.TypeOf(kmsg.Tags{})

func fillValue(rv reflect.Value, name string, n *int) {
	next := func() int64 { *n++; return int64(*n % 100) }
	switch rv.Kind() {
	case reflect.Struct:
		if rv.Type() == tagsType {
			return
		}
		for i := 0; i < rv.NumField(); i++ {
			f := rv.Type().Field(i)
			if !f.IsExported() || f.Name == "Version" {
				continue
			}
			fillValue(rv.Field(i), f.Name, n)
		}
	case reflect.String:
		rv.SetString(name)
	case reflect.Bool:
		rv.SetBool(true)
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		rv.SetInt(next())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		rv.SetUint(uint64(next()))
	case reflect.Float32, reflect.Float64:
		rv.SetFloat(float64(next()) + 0.5)
	case reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			fillValue(rv.Index(i), name, n)
		}
	case reflect.Slice:
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			rv.SetBytes([]byte(name))
			return
		}
		s := reflect.MakeSlice(rv.Type(), 2, 2)
		for i := 0; i < 2; i++ {
			fillValue(s.Index(i), name, n)
		}
		rv.Set(s)
	case reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		fillValue(p.Elem(), name, n)
		rv.Set(p)
	}
}
