package cas_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/cas"
)

func hexOf(c byte) string { return strings.Repeat(string(c), 64) }

func TestParseManifest(t *testing.T) {
	a, b, c := "sha256:"+hexOf('a'), "sha256:"+hexOf('b'), "sha256:"+hexOf('c')
	desc := func(d string) string { return fmt.Sprintf(`{"mediaType":"x","digest":%q,"size":1}`, d) }
	cases := []struct {
		name, body string
		want       []string
		isManifest bool
	}{
		{"OCI image manifest: config and layers", `{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":` + desc(c) + `,"layers":[` + desc(b) + `,` + desc(a) + `]}`, []string{a, b, c}, true},
		{"Docker manifest list: children", ` {"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.list.v2+json","manifests":[` + desc(a) + `,` + desc(a) + `]}`, []string{a}, true},
		{"a subject is not kept by its referrer", `{"schemaVersion":2,"config":` + desc(a) + `,"layers":[],"subject":` + desc(b) + `}`, []string{a}, true},
		{"unknown algorithms are left out", `{"schemaVersion":2,"layers":[` + desc("sha512:"+hexOf('d')) + `,` + desc(b) + `]}`, []string{b}, true},
		{"an image config names no content", `{"architecture":"amd64","rootfs":{"type":"layers","diff_ids":["` + a + `"]}}`, nil, false},
		{"schema version 1", `{"schemaVersion":1,"layers":[` + desc(a) + `]}`, nil, false},
		{"not JSON", "\x1f\x8b layer bytes " + a, nil, false},
		{"broken JSON", `{"schemaVersion":2,"layers":[` + desc(a), nil, false},
		{"empty", "", nil, false},
	}
	for _, tc := range cases {
		got, ok, err := cas.ParseManifest([]byte(tc.body))
		if err != nil || ok != tc.isManifest || !slices.Equal(got, tc.want) {
			t.Errorf("%s: ParseManifest = %v, %v, %v; want %v, %v", tc.name, got, ok, err, tc.want, tc.isManifest)
		}
	}
	var many []string
	for i := range cas.MaxDigestsPerObject + 1 {
		many = append(many, desc(fmt.Sprintf("sha256:%064x", i)))
	}
	body := `{"schemaVersion":2,"layers":[` + strings.Join(many, ",") + `]}`
	if _, _, err := cas.ParseManifest([]byte(body)); !errors.Is(err, cas.ErrTooManyDigests) {
		t.Errorf("a manifest naming %d digests: err = %v, want ErrTooManyDigests", len(many), err)
	}
}

// TestPresetDistribution checks which of distribution's keys the preset
// treats as blobs, roots, caches and plain objects.
func TestPresetDistribution(t *testing.T) {
	for _, root := range []string{"", "reg", "/reg/"} {
		l, err := cas.Preset(cas.PresetDistribution, "registry", root, 0)
		if err != nil {
			t.Fatal(err)
		}
		base := strings.Trim(root, "/")
		if base != "" {
			base += "/"
		}
		base += "docker/registry/v2/"
		h := hexOf('e')
		blob := base + "blobs/sha256/ee/" + h + "/data"
		if ns, d, ok := l.Namespace("registry", blob); !ok || d != "sha256:"+h || ns.Content != cas.ContentManifests || !ns.Verify {
			t.Errorf("root %q: blob key: namespace %v, digest %q, ok %v", root, ns, d, ok)
		}
		if !l.HasReferences("registry", blob) {
			t.Errorf("root %q: a blob of a content namespace has references", root)
		}
		repo := base + "repositories/library/app/"
		for key, want := range map[string]string{
			repo + "_manifests/revisions/sha256/" + h + "/link":        "registry-roots",
			repo + "_manifests/tags/v1.0/current/link":                 "registry-roots",
			repo + "_manifests/tags/v1.0/index/sha256/" + h + "/link":  "",
			repo + "_layers/sha256/" + h + "/link":                     "",
			repo + "_uploads/0f1e/data":                                "",
			repo + "_uploads/0f1e/startedat":                           "",
			base + "repositories/a/_manifests/revisions/sha256/x/link": "",
		} {
			got := ""
			if s := l.Source("registry", key); s != nil {
				got = s.Name
			}
			if got != want {
				t.Errorf("root %q: %s: source %q, want %q", root, key, got, want)
			}
		}
		if got := len(l.RebuildSources()); got != 2 {
			t.Errorf("root %q: %d sources to rebuild, want the roots and the blobs' content", root, got)
		}
	}
	if _, err := cas.Preset("harbor", "registry", "", 0); err == nil {
		t.Error("an unknown preset was accepted")
	}
}

func TestLayoutValidateKinds(t *testing.T) {
	keyed := func(name, keys string) cas.Source {
		s, err := cas.NewSource(name, "b", "p/", "", 0)
		if err == nil && keys != "" {
			err = s.SetKeys(keys)
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ns, err := cas.NewNamespace("blobs", "b", "blobs/", "", false)
	if err != nil {
		t.Fatal(err)
	}
	both := cas.Layout{Sources: []cas.Source{keyed("one", "a$"), keyed("two", "b$")}}
	if err := both.Validate(); err != nil {
		t.Errorf("two keyed sources sharing a prefix: %v", err)
	}
	open := cas.Layout{Sources: []cas.Source{keyed("one", "a$"), keyed("two", "")}}
	if err := open.Validate(); err == nil {
		t.Error("a source without keys overlapping another was accepted")
	}
	odd := keyed("odd", "")
	odd.Kind = "weak"
	if err := (&cas.Layout{Sources: []cas.Source{odd}}).Validate(); err == nil {
		t.Error("an unknown kind was accepted")
	}
	ns.Content = cas.ContentManifests
	if err := (&cas.Layout{Namespaces: []cas.Namespace{ns}}).Validate(); err == nil {
		t.Error("a content namespace that does not verify was accepted")
	}
}

// FuzzParseManifest feeds ParseManifest arbitrary bodies: it never panics,
// and what it returns is a manifest's digests, valid, sorted and unique,
// or nothing.
func FuzzParseManifest(f *testing.F) {
	d := "sha256:" + hexOf('a')
	f.Add([]byte(`{"schemaVersion":2,"config":{"digest":"` + d + `"},"layers":[{"digest":"` + d + `"}]}`))
	f.Add([]byte(`{"schemaVersion":2,"manifests":[{"digest":"sha256:x"}]}`))
	f.Add([]byte("\x1f\x8b\x08"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok, err := cas.ParseManifest(body)
		if err != nil {
			if !errors.Is(err, cas.ErrTooManyDigests) || got != nil || ok {
				t.Fatalf("ParseManifest = %v, %v, %v", got, ok, err)
			}
			return
		}
		if ok != (len(got) > 0) || len(got) > cas.MaxDigestsPerObject || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("ParseManifest = %v, %v", got, ok)
		}
		for _, g := range got {
			if !cas.Valid(g) {
				t.Fatalf("ParseManifest named %q, not a valid digest", g)
			}
		}
	})
}
