package k8s

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/shalelog/shale/tests/netns"
)

// apiServerBinaries finds kube-apiserver and etcd: $SHALE_KUBE_APISERVER and $SHALE_ETCD,
// else what tests/k8s/build-apiserver.sh cached (else Debian's etcd).
func apiServerBinaries(t *testing.T) (apiserver, etcd string) {
	cache := os.Getenv("SHALE_CACHE")
	if cache == "" {
		if d, err := os.UserCacheDir(); err == nil {
			cache = filepath.Join(d, "shale")
		}
	}
	apiserver = os.Getenv("SHALE_KUBE_APISERVER")
	if apiserver == "" {
		apiserver = filepath.Join(cache, "kube-apiserver-"+kubeVersion.Version)
	}
	etcd = os.Getenv("SHALE_ETCD")
	if etcd == "" {
		etcd = filepath.Join(cache, "etcd-for-"+kubeVersion.Version)
		if _, err := os.Stat(etcd); err != nil {
			if p, err := exec.LookPath("etcd"); err == nil {
				etcd = p
			}
		}
	}
	for _, b := range []string{apiserver, etcd} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s is not built (run tests/k8s/build-apiserver.sh, as make test-k8s does); skipping", b)
		}
	}
	return apiserver, etcd
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startDaemon runs a server process until the test ends, its output in dir/name.log.
func startDaemon(t *testing.T, dir, name string, argv ...string) *exec.Cmd {
	t.Helper()
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := netns.Spawn(cmd); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			lines := strings.Split(string(data), "\n")
			t.Logf("%s log tail:\n%s", name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
		}
	})
	return cmd
}

// startAPIServer starts etcd and kube-apiserver on loopback, with a static token that is
// cluster-admin, and returns a client config.
func startAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	apiserver, etcd := apiServerBinaries(t)
	dir := t.TempDir()
	clientPort, peerPort := freePort(t), freePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	startDaemon(t, dir, "etcd", etcd, "--name=default", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--unsafe-no-fsync")

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	der := x509.MarshalPKCS1PrivateKey(key)
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	const token = "shale-chart-test"
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	startDaemon(t, dir, "kube-apiserver", apiserver,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+keyFile, "--service-account-signing-key-file="+keyFile,
		"--service-cluster-ip-range=10.96.0.0/16",
		// No controller-manager creates the namespaces' default ServiceAccounts here.
		"--disable-admission-plugins=ServiceAccount")
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", port), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 100, Burst: 200}

	// Ready when /readyz says so (etcd reachable, bootstrap done).
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, cfg.Host+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kube-apiserver not ready after 3 minutes (last: %v)", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return cfg
}

// serviceMonitorCRD is the Prometheus Operator's CRD reduced to what the server needs to
// accept a ServiceMonitor.
const serviceMonitorCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
`

type applier struct {
	t      *testing.T
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// apply is a server-side apply of one YAML document (dry run: validated and admitted,
// not stored).
func (a *applier) apply(ctx context.Context, doc []byte, dryRun bool) error {
	obj := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
		return err
	}
	gvk := obj.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		a.mapper.Reset()
		if mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: "shale-chart-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Apply(ctx, obj.GetName(), obj, opts)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// TestAPIServerAcceptsChart: a real kube-apiserver takes every value set's manifests by
// server-side apply (dry run: validation, defaulting and admission), stores the default
// set, and then serves the chart's own lookup, which refuses a scale down.
func TestAPIServerAcceptsChart(t *testing.T) {
	cfg := startAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &applier{t: t, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	ns := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n", namespace)
	if err := a.apply(ctx, []byte(ns), false); err != nil {
		t.Fatal(err)
	}
	if err := a.apply(ctx, []byte(serviceMonitorCRD), false); err != nil {
		t.Fatal(err)
	}
	// The CRD serves once established.
	for {
		err := a.apply(ctx, []byte("apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: probe, namespace: "+namespace+"}\nspec: {}\n"), true)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("ServiceMonitor CRD never served: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}

	for _, name := range slices.Sorted(maps.Keys(valueSets)) {
		t.Run(name, func(t *testing.T) {
			out, err := render(t, valueSets[name], nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range decodeAll(t, out) {
				if err := a.apply(ctx, m.raw, true); err != nil {
					t.Errorf("%s: %v", m.source, err)
				}
				n++
			}
			t.Logf("%d manifests accepted", n)
		})
	}

	// Install the default set for real; an upgrade that would scale it down is refused.
	out, err := render(t, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range decodeAll(t, out) {
		if err := a.apply(ctx, m.raw, false); err != nil {
			t.Fatalf("%s: %v", m.source, err)
		}
	}
	for _, tc := range []struct {
		vals map[string]any
		want string
	}{
		{map[string]any{}, ""},
		{map[string]any{"replicas": 2}, "REFUSING TO SCALE DOWN from 3 to 2"},
		{map[string]any{"replicas": 2, "allowScaleDown": true}, "REFUSING TO CHANGE replicas from 3 to 2 in combined mode"},
	} {
		_, err := render(t, tc.vals, cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("upgrade with %v: %v", tc.vals, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("upgrade with %v: %v; want %q", tc.vals, err, tc.want)
		}
	}
	if _, err := dyn.Resource(schemaGVR("apps", "v1", "statefulsets")).Namespace(namespace).Get(ctx, "shale", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		t.Fatal("the StatefulSet was not stored")
	}
}

func schemaGVR(group, version, resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
}
