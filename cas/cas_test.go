package cas

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func hex64(i int) string { return fmt.Sprintf("%064x", i) }

func TestNamespaceDigest(t *testing.T) {
	t.Parallel()
	reg, err := NewNamespace("", "reg", "blobs/sha256/", "", true)
	if err != nil {
		t.Fatal(err)
	}
	lfs, err := NewNamespace("lfs", "lfs", "lfs/objects/", `^[0-9a-f]{2}/[0-9a-f]{2}/(?P<hex>[0-9a-f]{64})$`, false)
	if err != nil {
		t.Fatal(err)
	}
	h := hex64(0xabcdef7)
	tests := []struct {
		ns   *Namespace
		key  string
		want string
	}{
		{&reg, "blobs/sha256/" + h, "sha256:" + h},
		{&reg, "blobs/sha256/" + h + "/data", ""},
		{&reg, "blobs/sha256/" + strings.ToUpper(h), ""},
		{&reg, "blobs/sha256/" + h[:63], ""},
		{&reg, "manifests/" + h, ""},
		{&lfs, "lfs/objects/" + h[:2] + "/" + h[2:4] + "/" + h, "sha256:" + h},
	}
	for _, tt := range tests {
		got, ok := tt.ns.Digest(tt.key)
		if ok != (tt.want != "") || got != tt.want && tt.want != "" {
			t.Errorf("%s Digest(%q) = %q, %v; want %q", tt.ns.Name, tt.key, got, ok, tt.want)
		}
	}
	if reg.Name != "reg/blobs/sha256/" {
		t.Errorf("default name = %q", reg.Name)
	}
}

func TestSourceExtract(t *testing.T) {
	t.Parallel()
	src, err := NewSource("", "reg", "manifests/", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	a, b := hex64(1), hex64(2)
	manifest := fmt.Sprintf(`{"config":{"digest":"sha256:%s"},"layers":[{"digest":"sha256:%s"},{"digest":"sha256:%s"},{"digest":"sha512:%s"}]}`, b, a, b, a)
	got, err := src.Extract([]byte(manifest))
	if err != nil || !slices.Equal(got, []string{"sha256:" + a, "sha256:" + b}) {
		t.Fatalf("Extract = %v, %v", got, err)
	}
	lfsPointer := "version https://git-lfs.github.com/spec/v1\noid sha256:" + a + "\nsize 12345\n"
	if got, _ := src.Extract([]byte(lfsPointer)); !slices.Equal(got, []string{"sha256:" + a}) {
		t.Fatalf("Extract(LFS pointer) = %v", got)
	}
	var many strings.Builder
	for i := range MaxDigestsPerObject + 1 {
		fmt.Fprintf(&many, "sha256:%s\n", hex64(i))
	}
	if _, err := src.Extract([]byte(many.String())); !errors.Is(err, ErrTooManyDigests) {
		t.Fatalf("Extract(too many) = %v", err)
	}
	if src.MaxBody != DefaultMaxBody {
		t.Fatalf("default MaxBody = %d", src.MaxBody)
	}
}

func TestPatternsNeedAHexGroup(t *testing.T) {
	t.Parallel()
	if _, err := NewNamespace("", "b", "p/", `^[0-9a-f]{64}$`, false); err == nil {
		t.Fatal("a pattern without a hex group was accepted")
	}
	if _, err := NewSource("", "b", "p/", `(`, 0); err == nil {
		t.Fatal("an invalid pattern was accepted")
	}
	if _, err := NewSource("", "", "p/", "", 0); err == nil {
		t.Fatal("a source without a bucket was accepted")
	}
}

func TestLayout(t *testing.T) {
	t.Parallel()
	ns, _ := NewNamespace("", "reg", "blobs/", "", false)
	src, _ := NewSource("", "reg", "manifests/", "", 0)
	l := &Layout{Namespaces: []Namespace{ns}, Sources: []Source{src}}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	if n, d, ok := l.Namespace("reg", "blobs/"+hex64(3)); n == nil || !ok || d != "sha256:"+hex64(3) {
		t.Fatalf("Namespace = %v %q %v", n, d, ok)
	}
	if n, _, ok := l.Namespace("reg", "blobs/not-a-digest"); n == nil || ok {
		t.Fatal("a key in the prefix that does not match must report the namespace without a digest")
	}
	if l.Source("reg", "manifests/x") == nil || l.Source("other", "manifests/x") != nil {
		t.Fatal("Source")
	}
	if err := l.Sources[0].SetKeys(`/link$`); err != nil {
		t.Fatal(err)
	}
	if l.Source("reg", "manifests/a/link") == nil || l.Source("reg", "manifests/a/_uploads/u/data") != nil {
		t.Fatal("a source's key pattern does not narrow it")
	}
	if err := l.Sources[0].SetKeys(`(`); err == nil {
		t.Fatal("an invalid key pattern was accepted")
	}
	if !l.HasBucket("reg") || l.HasBucket("other") || l.Empty() || !(*Layout)(nil).Empty() {
		t.Fatal("HasBucket/Empty")
	}
	overlap, _ := NewSource("", "reg", "blobs/sha256/", "", 0)
	bad := &Layout{Namespaces: []Namespace{ns}, Sources: []Source{overlap}}
	if err := bad.Validate(); err == nil {
		t.Fatal("overlapping namespace and source were accepted")
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	for d, want := range map[string]bool{
		"sha256:" + hex64(1):                true,
		"sha256:" + hex64(1)[:10]:           false,
		"md5:" + hex64(1):                   false,
		"sha256:" + strings.Repeat("g", 64): false,
		"":                                  false,
	} {
		if Valid(d) != want {
			t.Errorf("Valid(%q) = %v", d, !want)
		}
	}
}

// FuzzExtract feeds hostile bodies to the default reference extractor:
// it must not panic, must return at most MaxDigestsPerObject valid digests
// that occur in the body, sorted and unique.
func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"layers":[{"digest":"sha256:` + hex64(1) + `"}]}`))
	f.Add([]byte("oid sha256:" + hex64(2) + "\n"))
	f.Add([]byte("sha256:sha256:" + hex64(3) + hex64(4)))
	f.Add([]byte{0xff, 0xfe, 's', 'h', 'a'})
	src, err := NewSource("", "b", "", "", 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := src.Extract(body)
		if err != nil {
			if !errors.Is(err, ErrTooManyDigests) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if len(got) > MaxDigestsPerObject || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("Extract = %v", got)
		}
		for _, d := range got {
			if !Valid(d) || !strings.Contains(strings.ToLower(string(body)), d) {
				t.Fatalf("digest %q is not valid or not in the body", d)
			}
		}
	})
}

// TestKeyOf checks that the key a namespace builds for a digest is the key
// it reads that digest from, for the default pattern and the preset, and
// that a namespace with a custom pattern builds none.
func TestKeyOf(t *testing.T) {
	preset, err := Preset(PresetDistribution, "reg", "root", 0)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := NewNamespace("", "b", "blobs/", "", false)
	if err != nil {
		t.Fatal(err)
	}
	custom, err := NewNamespace("", "b", "c/", `^x-(?P<hex>[0-9a-f]{64})$`, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		sum := sha256.Sum256([]byte{byte(i)})
		d := "sha256:" + hex.EncodeToString(sum[:])
		for _, n := range []*Namespace{&preset.Namespaces[0], &plain} {
			key, ok := n.KeyOf(d)
			if !ok {
				t.Fatalf("%s: no key for %s", n.Name, d)
			}
			if got, ok := n.Digest(key); !ok || got != d {
				t.Fatalf("%s: key %q reads as %q, %v; want %s", n.Name, key, got, ok, d)
			}
		}
		if key, ok := custom.KeyOf(d); ok {
			t.Fatalf("custom pattern built key %q", key)
		}
	}
	if _, ok := plain.KeyOf("sha512:abcd"); ok {
		t.Fatal("a key for another algorithm")
	}
	if !preset.ConfirmsBlobs("reg", "root/docker/registry/v2/repositories/app/_manifests/tags/a/current/link") {
		t.Fatal("the preset's roots do not confirm blobs")
	}
	if preset.ConfirmsBlobs("reg", "root/docker/registry/v2/repositories/app/_layers/sha256/"+strings.Repeat("a", 64)+"/link") {
		t.Fatal("the preset's caches confirm blobs")
	}
}

// TestFingerprint checks that the fingerprint follows every field that
// decides what is recorded, and nothing else.
func TestFingerprint(t *testing.T) {
	base := func() Layout {
		l, err := Preset(PresetDistribution, "reg", "", 0)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := base(), base()
	if a.Fingerprint() != b.Fingerprint() || a.Fingerprint() == "" {
		t.Fatalf("the same layout has fingerprints %q and %q", a.Fingerprint(), b.Fingerprint())
	}
	if (&Layout{}).Fingerprint() != "" {
		t.Fatal("an empty layout has a fingerprint")
	}
	changes := map[string]func(*Layout){
		"namespace prefix":  func(l *Layout) { l.Namespaces[0].Prefix += "x/" },
		"namespace verify":  func(l *Layout) { l.Namespaces[0].Verify = false },
		"namespace content": func(l *Layout) { l.Namespaces[0].Content = "" },
		"source confirm":    func(l *Layout) { l.Sources[0].ConfirmBlobs = false },
		"source kind":       func(l *Layout) { l.Sources[1].Kind = KindRoot },
		"source max body":   func(l *Layout) { l.Sources[0].MaxBody++ },
		"source dropped":    func(l *Layout) { l.Sources = l.Sources[:1] },
		"source added": func(l *Layout) {
			s, _ := NewSource("more", "reg", "more/", "", 0)
			l.Sources = append(l.Sources, s)
		},
	}
	for name, change := range changes {
		l := base()
		change(&l)
		if l.Fingerprint() == a.Fingerprint() {
			t.Errorf("%s: the fingerprint did not change", name)
		}
	}
}
