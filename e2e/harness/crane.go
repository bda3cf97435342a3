package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// craneTimeout bounds one crane command.
const craneTimeout = 2 * time.Minute

// Crane runs the crane binary against registries on loopback, over plain
// HTTP, with an empty Docker configuration (no credentials).
type Crane struct {
	t   testing.TB
	bin string
	dir string
}

// NewCrane returns a crane runner whose configuration and pulled layouts
// live in a temporary directory.
func NewCrane(t testing.TB) *Crane {
	t.Helper()
	return &Crane{t: t, bin: CraneBinary(t), dir: t.TempDir()}
}

// Run runs `crane ARGS --insecure` and returns its standard output.
func (c *Crane) Run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(c.t.Context(), craneTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(args, "--insecure")...)
	cmd.Env = childEnv([]string{"DOCKER_CONFIG=", "HOME="}, "DOCKER_CONFIG="+c.dir, "HOME="+c.dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("crane %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// Must runs crane and fails the test if it fails.
func (c *Crane) Must(args ...string) string {
	c.t.Helper()
	out, err := c.Run(args...)
	if err != nil {
		c.t.Fatalf("harness: %v", err)
	}
	return out
}

// WriteLayerTar writes a layer tarball holding one file of size
// pseudo-random bytes for seed, and returns its path. The same seed and
// size give the same tarball, and so (crane compresses it the same way)
// the same layer digest.
func WriteLayerTar(t testing.TB, dir string, seed uint64, size int64) string {
	t.Helper()
	path := filepath.Join(dir, fmt.Sprintf("layer-%d-%d.tar", seed, size))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{Name: fmt.Sprintf("data/%d", seed), Mode: 0o644, Size: size, ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatalf("harness: layer tar: %v", err)
	}
	if _, err := io.Copy(tw, NewData(seed, size).Reader()); err != nil {
		t.Fatalf("harness: layer tar: %v", err)
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("harness: layer tar: %v", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatalf("harness: layer tar: %v", err)
	}
	return path
}

// Pushed is what one reference named when it was pushed: its manifest's
// digest and every blob it reaches.
type Pushed struct {
	// Ref is the reference pushed (HOST/REPO:TAG).
	Ref string
	// Digest is its manifest's digest.
	Digest string
	// Blobs maps each digest the reference reaches (manifests, configs,
	// layers; an index's children and theirs) to what it holds.
	Blobs map[string]PushedBlob
}

// PushedBlob is one blob as it was pushed: the bytes of a manifest or
// config, or the uncompressed tarball of a layer.
type PushedBlob struct {
	Bytes    []byte
	LayerTar string
}

// Digests returns the set of blob digests p reaches.
func (p Pushed) Digests() map[string]bool {
	set := make(map[string]bool, len(p.Blobs))
	for d := range p.Blobs {
		set[d] = true
	}
	return set
}

// ByDigest returns the reference of p's manifest by digest.
func (p Pushed) ByDigest() string {
	repo, _, _ := strings.Cut(p.Ref, "@")
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return repo + "@" + p.Digest
}

// PushImage pushes an image of the layer tarballs, in order, to ref
// (HOST/REPO:TAG) with `crane append`, Docker media types or, with oci,
// OCI ones. A tarball pushed before gives the same layer blob.
func (c *Crane) PushImage(ref string, oci bool, layerTars ...string) Pushed {
	c.t.Helper()
	p, err := c.TryPushImage(ref, oci, layerTars...)
	if err != nil {
		c.t.Fatalf("harness: %v", err)
	}
	return p
}

// TryPushImage is PushImage returning crane's error instead of failing the
// test, for a push that may race with a deletion.
func (c *Crane) TryPushImage(ref string, oci bool, layerTars ...string) (Pushed, error) {
	c.t.Helper()
	args := []string{"append", "-t", ref}
	if oci {
		args = append(args, "--oci-empty-base")
	}
	for _, l := range layerTars {
		args = append(args, "-f", l)
	}
	if _, err := c.Run(args...); err != nil {
		return Pushed{}, err
	}
	p := c.Describe(ref)
	var m manifestJSON
	if err := json.Unmarshal(p.Blobs[p.Digest].Bytes, &m); err != nil || len(m.Layers) != len(layerTars) {
		c.t.Fatalf("harness: %s has %d layers, pushed %d (%v)", ref, len(m.Layers), len(layerTars), err)
	}
	for i, l := range m.Layers {
		p.Blobs[l.Digest] = PushedBlob{LayerTar: layerTars[i]}
	}
	return p, nil
}

// PushIndex pushes an OCI index of the children's manifests to ref with
// `crane index append`; the result also reaches every blob of the children.
func (c *Crane) PushIndex(ref string, children ...Pushed) Pushed {
	c.t.Helper()
	args := []string{"index", "append", "-t", ref}
	for _, ch := range children {
		args = append(args, "-m", ch.ByDigest())
	}
	c.Must(args...)
	p := c.Describe(ref)
	for _, ch := range children {
		maps.Copy(p.Blobs, ch.Blobs)
	}
	return p
}

// Describe reads what ref reaches from the registry: its manifest's digest
// and the bytes of every manifest and config under it. Layers are listed
// with no bytes (PushImage fills in their tarballs).
func (c *Crane) Describe(ref string) Pushed {
	c.t.Helper()
	p := Pushed{Ref: ref, Digest: c.Digest(ref), Blobs: map[string]PushedBlob{}}
	c.describe(p.ByDigest(), p.Blobs)
	return p
}

// manifestJSON is what the harness reads of an image manifest or index.
type manifestJSON struct {
	MediaType string       `json:"mediaType"`
	Config    *descriptor  `json:"config"`
	Layers    []descriptor `json:"layers"`
	Manifests []descriptor `json:"manifests"`
}

type descriptor struct {
	Digest string `json:"digest"`
}

func (c *Crane) describe(byDigest string, blobs map[string]PushedBlob) {
	c.t.Helper()
	body := []byte(c.Must("manifest", byDigest))
	_, digest, _ := strings.Cut(byDigest, "@")
	if got := "sha256:" + SHA256Hex(body); got != digest {
		c.t.Fatalf("harness: manifest %s has digest %s", byDigest, got)
	}
	blobs[digest] = PushedBlob{Bytes: body}
	var m manifestJSON
	if err := json.Unmarshal(body, &m); err != nil {
		c.t.Fatalf("harness: manifest %s: %v", byDigest, err)
	}
	repo, _, _ := strings.Cut(byDigest, "@")
	for _, child := range m.Manifests {
		c.describe(repo+"@"+child.Digest, blobs)
	}
	if m.Config != nil {
		blobs[m.Config.Digest] = PushedBlob{Bytes: []byte(c.Must("blob", repo+"@"+m.Config.Digest))}
	}
	for _, l := range m.Layers {
		if _, ok := blobs[l.Digest]; !ok {
			blobs[l.Digest] = PushedBlob{}
		}
	}
}

// Digest returns the digest of ref's manifest (`crane digest`).
func (c *Crane) Digest(ref string) string {
	c.t.Helper()
	return strings.TrimSpace(c.Must("digest", ref))
}

// Delete deletes ref through the registry API (`crane delete`): by digest
// (REPO@sha256:HEX) the manifest, by tag (REPO:TAG) the tag alone.
func (c *Crane) Delete(ref string) {
	c.t.Helper()
	c.Must("delete", ref)
}

// RequirePullIntact pulls p.Ref into an OCI layout (`crane pull --format
// oci`) and fails the test unless it holds p's manifest and every blob p
// reaches, byte for byte: manifests and configs equal to what was pushed,
// each blob's bytes hashing to its digest, and each layer's uncompressed
// bytes equal to its tarball.
func (c *Crane) RequirePullIntact(p Pushed) {
	c.t.Helper()
	dir, err := os.MkdirTemp(c.dir, "pull-")
	if err != nil {
		c.t.Fatalf("harness: %v", err)
	}
	defer os.RemoveAll(dir)
	c.Must("pull", "--format", "oci", p.Ref, dir)
	var index manifestJSON
	if b, err := os.ReadFile(filepath.Join(dir, "index.json")); err != nil || json.Unmarshal(b, &index) != nil ||
		len(index.Manifests) != 1 || index.Manifests[0].Digest != p.Digest {
		c.t.Fatalf("harness: pulled %s: the layout's index.json does not name %s alone (%v):\n%s", p.Ref, p.Digest, err, b)
	}
	for _, d := range slices.Sorted(maps.Keys(p.Blobs)) {
		if err := checkPulledBlob(dir, d, p.Blobs[d]); err != nil {
			c.t.Fatalf("harness: pulled %s: blob %s: %v", p.Ref, d, err)
		}
	}
}

// checkPulledBlob checks blob d in an OCI layout against what was pushed.
func checkPulledBlob(layout, d string, want PushedBlob) error {
	algo, hexDigest, _ := strings.Cut(d, ":")
	got, err := os.ReadFile(filepath.Join(layout, "blobs", algo, hexDigest))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(got)
	if hex.EncodeToString(sum[:]) != hexDigest {
		return fmt.Errorf("%d bytes that hash to sha256:%x", len(got), sum)
	}
	if want.LayerTar == "" {
		if !bytes.Equal(got, want.Bytes) {
			return fmt.Errorf("%d bytes differ from the %d pushed", len(got), len(want.Bytes))
		}
		return nil
	}
	tarball, err := os.ReadFile(want.LayerTar)
	if err != nil {
		return err
	}
	if bytes.HasPrefix(got, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(got))
		if err != nil {
			return err
		}
		if got, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("gunzip: %w", err)
		}
	}
	if !bytes.Equal(got, tarball) {
		return fmt.Errorf("the layer's %d uncompressed bytes differ from %s", len(got), want.LayerTar)
	}
	return nil
}
