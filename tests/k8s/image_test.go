package k8s

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shalelog/shale/tests/netns"
)

// imageConfig is the part of an OCI image config the test checks.
type imageConfig struct {
	User         string              `json:"User"`
	Entrypoint   []string            `json:"Entrypoint"`
	Cmd          []string            `json:"Cmd"`
	Env          []string            `json:"Env"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts"`
	Volumes      map[string]struct{} `json:"Volumes"`
	WorkingDir   string              `json:"WorkingDir"`
	Labels       map[string]string   `json:"Labels"`
}

// TestImage builds deploy/image/Containerfile as `make image` does, checks its config and
// its one layer, then runs it: with podman where the sandbox allows containers, else (a
// sandbox refusing setrlimit) the image's own filesystem, entrypoint, command and user
// under chroot in a network namespace, until /readyz answers.
func TestImage(t *testing.T) {
	builder := ""
	for _, b := range []string{"buildah", "podman"} {
		if _, err := exec.LookPath(b); err == nil {
			builder = b
			break
		}
	}
	if builder == "" {
		t.Skip("neither buildah nor podman is installed (tests/deps.sh installs buildah); skipping")
	}
	const image = "localhost/shale:k8s-test"
	run := func(name string, args ...string) []byte {
		t.Helper()
		cmd := exec.Command(name, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	run("bash", "../../deploy/image/build.sh", image, shaleBin)
	t.Cleanup(func() { _ = exec.Command(builder, "rmi", "-f", image).Run() })

	// The image's layout as OCI: config and layers as files.
	layout := t.TempDir()
	if builder == "buildah" {
		run("buildah", "push", "--quiet", image, "oci:"+layout)
	} else {
		run("podman", "save", "--quiet", "--format", "oci-dir", "-o", layout, image)
	}
	var index struct {
		Manifests []struct{ Digest string } `json:"manifests"`
	}
	readJSON(t, filepath.Join(layout, "index.json"), &index)
	var manifest struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	readJSON(t, blob(layout, index.Manifests[0].Digest), &manifest)
	var cfg struct {
		Config imageConfig `json:"config"`
	}
	readJSON(t, blob(layout, manifest.Config.Digest), &cfg)
	c := cfg.Config

	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/shale"}) || len(c.Cmd) == 0 || c.Cmd[0] != "serve" {
		t.Errorf("entrypoint %q cmd %q, want [/shale] [serve ...]", c.Entrypoint, c.Cmd)
	}
	for _, p := range []string{"9092/tcp", "9093/tcp", "9644/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed (%v)", p, c.ExposedPorts)
		}
	}
	if _, ok := c.Volumes["/var/lib/shale"]; !ok {
		t.Errorf("no volume /var/lib/shale (%v)", c.Volumes)
	}
	for _, e := range c.Env {
		// A SHALE_* variable would beat the server.properties the chart passes.
		if strings.HasPrefix(e, "SHALE_") {
			t.Errorf("image sets %s", e)
		}
	}
	for _, l := range []string{"org.opencontainers.image.title", "org.opencontainers.image.version",
		"org.opencontainers.image.revision", "org.opencontainers.image.source", "org.opencontainers.image.created"} {
		if c.Labels[l] == "" {
			t.Errorf("label %s missing", l)
		}
	}
	if len(manifest.Layers) != 1 {
		t.Errorf("%d layers, want 1 (the binary and its data directory on scratch)", len(manifest.Layers))
	}

	// The layer: the binary, byte for byte, and the data directory, both the user's;
	// nothing else. Unpacked, it is the root the fallback run uses.
	root := t.TempDir()
	want, err := os.ReadFile(shaleBin)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*tar.Header{}
	for _, l := range manifest.Layers {
		unpackLayer(t, blob(layout, l.Digest), root, files)
	}
	bin := files["shale"]
	if bin == nil || bin.Uid != 65532 || bin.Mode&0o111 == 0 {
		t.Fatalf("/shale in the image: %+v", bin)
	}
	got, err := os.ReadFile(filepath.Join(root, "shale"))
	if err != nil || sha256.Sum256(got) != sha256.Sum256(want) {
		t.Fatalf("/shale in the image is not the binary built (%v)", err)
	}
	if d := files["var/lib/shale/"]; d == nil || d.Uid != 65532 {
		t.Errorf("/var/lib/shale in the image: %+v, want a directory owned by 65532", d)
	}
	for name := range files {
		if name != "shale" && !strings.HasPrefix("var/lib/shale/", name) {
			t.Errorf("unexpected file in the image: %s", name)
		}
	}

	// Run it.
	if _, err := exec.LookPath("podman"); err == nil {
		out, err := exec.Command("podman", "run", "--rm", "--network=none", image, "version").CombinedOutput()
		if err == nil {
			t.Logf("podman run %s version: %s", image, strings.TrimSpace(string(out)))
			return
		}
		t.Logf("the container runtime refuses to run the image here (%v: %s); running its filesystem, entrypoint, command and user directly instead",
			err, strings.TrimSpace(string(out)))
	}
	nw := netns.New(t, 1)
	nn := nw.Nodes[0]
	args := append([]string{"--userspec=" + c.User, root}, append(c.Entrypoint, c.Cmd...)...)
	cmd := nn.Command("chroot", args...)
	cmd.Env = c.Env
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := netns.Spawn(cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	p := &pod{name: "image", net: nn, port: 9644}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		ok, why := p.get(ctx, "/readyz")
		if ok {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the image's entrypoint exited: %v\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("/readyz never answered ready (%s)\n%s", why, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if ok, why := p.get(ctx, "/healthz"); !ok {
		t.Errorf("/healthz: %s", why)
	}
	if _, err := os.Stat(filepath.Join(root, "var/lib/shale/data")); err != nil {
		t.Errorf("no data written to the volume: %v", err)
	}
	t.Logf("%s %s as %s in a network namespace: ready", strings.Join(c.Entrypoint, " "), strings.Join(c.Cmd, " "), c.User)
}

func blob(layout, digest string) string {
	algo, hex, _ := strings.Cut(digest, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// unpackLayer extracts a (possibly gzipped) layer tar into root, keeping owners.
func unpackLayer(t *testing.T, path, root string, files map[string]*tar.Header) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz, err := gzip.NewReader(f); err == nil {
		r = gz
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if name == "" || name == "/" {
			continue
		}
		files[name] = h
		dst := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, os.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode).Perm())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		default:
			t.Fatalf("unexpected %c entry %s in the layer", h.Typeflag, name)
		}
		if err := os.Chown(dst, h.Uid, h.Gid); err != nil {
			t.Fatal(fmt.Errorf("chown %s: %w", dst, err))
		}
	}
}
