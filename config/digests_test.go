package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const testHex = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

func boolp(b bool) *bool { return &b }

// TestDigestsParsing sets digests.namespaces and digests.sources through
// every source and form, and checks what Load makes of them.
func TestDigestsParsing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		environ []string
		yaml    string
		wantNS  []DigestNamespace
		wantSrc []DigestSource
	}{
		{
			name:    "repeated flags, short form",
			args:    []string{"--digests-namespace", "registry/blobs/sha256/", "--digests-namespace=lfs", "--digests-source", "registry/manifests/,lfs-refs/p/"},
			wantNS:  []DigestNamespace{{Bucket: "registry", Prefix: "blobs/sha256/"}, {Bucket: "lfs"}},
			wantSrc: []DigestSource{{Bucket: "registry", Prefix: "manifests/"}, {Bucket: "lfs-refs", Prefix: "p/"}},
		},
		{
			name:    "environment, comma lists",
			environ: []string{"SWEEPGATE_DIGESTS_NAMESPACES=registry/blobs/ , other/b/", "SWEEPGATE_DIGESTS_SOURCES=registry/manifests/"},
			wantNS:  []DigestNamespace{{Bucket: "registry", Prefix: "blobs/"}, {Bucket: "other", Prefix: "b/"}},
			wantSrc: []DigestSource{{Bucket: "registry", Prefix: "manifests/"}},
		},
		{
			name:    "YAML short form",
			yaml:    "digests:\n  namespaces: [registry/blobs/sha256/]\n  sources:\n    - registry/manifests/\n",
			wantNS:  []DigestNamespace{{Bucket: "registry", Prefix: "blobs/sha256/"}},
			wantSrc: []DigestSource{{Bucket: "registry", Prefix: "manifests/"}},
		},
		{
			name: "YAML long form",
			yaml: `digests:
  namespaces:
    - name: lfs-objects
      bucket: lfs
      prefix: objects/
      pattern: '^[0-9a-f]{2}/[0-9a-f]{2}/(?P<hex>[0-9a-f]{64})$'
      verify: false
  sources:
    - {name: pointers, bucket: lfs, prefix: pointers/, pattern: 'oid sha256:(?P<hex>[0-9a-f]{64})', max_body: 1024}
`,
			wantNS: []DigestNamespace{{Name: "lfs-objects", Bucket: "lfs", Prefix: "objects/",
				Pattern: `^[0-9a-f]{2}/[0-9a-f]{2}/(?P<hex>[0-9a-f]{64})$`, Verify: boolp(false)}},
			wantSrc: []DigestSource{{Name: "pointers", Bucket: "lfs", Prefix: "pointers/", Pattern: `oid sha256:(?P<hex>[0-9a-f]{64})`, MaxBody: 1024}},
		},
		{
			name:    "YAML both forms in one list, null fields unset",
			yaml:    "digests:\n  namespaces:\n    - a/blobs/\n    - {bucket: b, prefix: ~, verify: ~}\n  sources:\n    - {bucket: a, prefix: m/, max_body: ~}\n",
			wantNS:  []DigestNamespace{{Bucket: "a", Prefix: "blobs/"}, {Bucket: "b"}},
			wantSrc: []DigestSource{{Bucket: "a", Prefix: "m/"}},
		},
		{
			name:    "flags over environment over file",
			args:    []string{"--digests-namespace=flag/n/"},
			environ: []string{"SWEEPGATE_DIGESTS_SOURCES=env/s/"},
			yaml:    "digests:\n  namespaces: [file/n/]\n  sources: [file/s/]\n",
			wantNS:  []DigestNamespace{{Bucket: "flag", Prefix: "n/"}},
			wantSrc: []DigestSource{{Bucket: "env", Prefix: "s/"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, requiredFlags...), tt.args...)
			if tt.yaml != "" {
				args = append(args, "--config", writeFile(t, tt.yaml))
			}
			c := mustLoad(t, args, tt.environ)
			if !reflect.DeepEqual(c.Digests.Namespaces, tt.wantNS) {
				t.Errorf("namespaces = %v, want %v", c.Digests.Namespaces, tt.wantNS)
			}
			if !reflect.DeepEqual(c.Digests.Sources, tt.wantSrc) {
				t.Errorf("sources = %v, want %v", c.Digests.Sources, tt.wantSrc)
			}
			l, err := c.Layout()
			if err != nil {
				t.Fatalf("Layout: %v", err)
			}
			if len(l.Namespaces) != len(tt.wantNS) || len(l.Sources) != len(tt.wantSrc) || l.Empty() {
				t.Errorf("layout has %d namespaces and %d sources", len(l.Namespaces), len(l.Sources))
			}
		})
	}
}

// TestLayout checks what the settings around the entries give them: the
// defaults of package cas, digests.verify and digests.max_body.
func TestLayout(t *testing.T) {
	t.Parallel()
	c := mustLoad(t, append(append([]string{}, requiredFlags...),
		"--digests-verify=false", "--digests-max-body=2048", "--config", writeFile(t, `digests:
  namespaces:
    - registry/blobs/sha256/
    - {name: checked, bucket: other, prefix: b/, verify: true}
  sources:
    - registry/manifests/
    - {bucket: other, prefix: m/, max_body: 99, keys: '/link$', confirm_blobs: true}
`)), nil)
	l, err := c.Layout()
	if err != nil {
		t.Fatal(err)
	}
	short, long := l.Namespaces[0], l.Namespaces[1]
	if short.Verify || !long.Verify {
		t.Errorf("verify: short form %t (want digests.verify, false), long form %t (want its own, true)", short.Verify, long.Verify)
	}
	if short.Name != "registry/blobs/sha256/" || long.Name != "checked" {
		t.Errorf("names %q, %q", short.Name, long.Name)
	}
	if l.Sources[0].MaxBody != 2048 || l.Sources[1].MaxBody != 99 {
		t.Errorf("max_body %d, %d; want 2048 (digests.max_body) and 99", l.Sources[0].MaxBody, l.Sources[1].MaxBody)
	}
	ns, d, ok := l.Namespace("registry", "blobs/sha256/"+testHex)
	if ns == nil || !ok || d != "sha256:"+testHex {
		t.Errorf("the default pattern does not find the digest of a blob key: %v %q %t", ns, d, ok)
	}
	src := l.Source("registry", "manifests/app/v1")
	if src == nil {
		t.Fatal("no source for a manifest key")
	}
	if got, err := src.Extract([]byte(`{"layers":[{"digest":"sha256:` + testHex + `"}]}`)); err != nil || len(got) != 1 || got[0] != "sha256:"+testHex {
		t.Errorf("the default source pattern found %q, %v", got, err)
	}
	if l.Sources[0].ConfirmBlobs || !l.Sources[1].ConfirmBlobs || !l.ConfirmsBlobs("other", "m/repo/_layers/link") {
		t.Errorf("confirm_blobs: %t, %t; want false (unset) and true", l.Sources[0].ConfirmBlobs, l.Sources[1].ConfirmBlobs)
	}
	if l.Source("other", "m/repo/_layers/link") == nil || l.Source("other", "m/repo/_uploads/u/data") != nil {
		t.Error("a source's keys pattern does not narrow it")
	}
	// Each call compiles its own layout: callers may keep and share it.
	l2, _ := c.Layout()
	if &l2.Namespaces[0] == &l.Namespaces[0] {
		t.Error("Layout returned the same layout twice")
	}
	if s := c.String(); !strings.Contains(s, "digests.namespaces=[registry/blobs/sha256/,other/b/{name=checked verify=true}]") {
		t.Errorf("String does not show the namespaces: %s", s)
	}
}

func TestDigestsValidation(t *testing.T) {
	t.Parallel()
	ns := []string{"--digests-namespace=reg/blobs/", "--digests-source=reg/manifests/"}
	with := func(extra ...string) []string { return append(append([]string{}, ns...), extra...) }
	tests := []struct {
		name string
		args []string
		yaml string
		want []string
	}{
		{"namespace and source overlap", []string{"--digests-namespace=reg/", "--digests-source=reg/manifests/"}, "",
			[]string{"digests.namespaces and digests.sources", "overlap", `"" and "manifests/"`}},
		{"two namespaces overlap", []string{"--digests-namespace=reg/a/", "--digests-namespace=reg/a/b/", "--digests-source=reg/m/"}, "",
			[]string{"overlap"}},
		{"namespace pattern without hex group", nil,
			"digests:\n  namespaces: [{bucket: reg, prefix: b/, pattern: '^(?P<digest>[0-9a-f]+)$'}]\n  sources: [reg/m/]\n",
			[]string{"digests.namespaces (--digests-namespace, SWEEPGATE_DIGESTS_NAMESPACES): entry 1 (reg/b/)", "no group named hex"}},
		{"source pattern does not compile", nil,
			"digests:\n  namespaces: [reg/b/]\n  sources: [{bucket: reg, prefix: m/, pattern: '(?P<hex>[0-9a-f'}]\n",
			[]string{"digests.sources (--digests-source, SWEEPGATE_DIGESTS_SOURCES): entry 1 (reg/m/)", "missing closing ]"}},
		{"bucket with slash", nil,
			"digests:\n  namespaces: [{bucket: reg/b, prefix: x/}]\n  sources: [reg/m/]\n",
			[]string{"digests.namespaces", `bucket "reg/b" must not contain '/'`}},
		{"name used twice", nil,
			"digests:\n  namespaces: [{name: x, bucket: reg, prefix: b/}]\n  sources: [{name: x, bucket: reg, prefix: m/}]\n",
			[]string{"digests.sources", `the name "x" is used twice`}},
		{"confirm_blobs with a custom namespace pattern", nil,
			"digests:\n  namespaces: [{bucket: reg, prefix: b/, pattern: '^x(?P<hex>[0-9a-f]{64})$'}]\n  sources: [{bucket: reg, prefix: m/, confirm_blobs: true}]\n",
			[]string{"confirm_blobs needs every namespace", "custom pattern"}},
		{"confirm_blobs not a boolean", nil,
			"digests:\n  namespaces: [reg/b/]\n  sources: [{bucket: reg, prefix: m/, confirm_blobs: sometimes}]\n",
			[]string{"digests.sources", `confirm_blobs: "sometimes" is not a boolean`}},
		{"negative source max_body", nil,
			"digests:\n  namespaces: [reg/b/]\n  sources: [{bucket: reg, prefix: m/, max_body: -1}]\n",
			[]string{"digests.sources", "max_body must be 1 byte or more"}},
		{"namespaces without sources", []string{"--digests-namespace=reg/b/"}, "",
			[]string{"digests.sources", "every blob would count as unreferenced"}},
		{"sessions off", with("--sessions-enabled=false"), "", []string{"digests.namespaces", "needs sessions.enabled"}},
		{"plane with slash", with("--digests-planes=backup,dr/west"), "", []string{"digests.planes", `"dr/west"`, "'/'"}},
		{"plane with space", nil, "digests:\n  planes: ['dr west']\n", []string{"digests.planes", "spaces"}},
		{"empty plane", nil, "digests:\n  planes: ['']\n", []string{"digests.planes", "needs a name"}},
		{"plane twice", []string{"--digests-planes=a,b,a"}, "", []string{"digests.planes", `"a" is listed twice`}},
		{"max_delete zero", []string{"--digests-max-delete=0"}, "", []string{"digests.max_delete", "-1 for no absolute limit"}},
		{"max_delete below -1", []string{"--digests-max-delete=-5"}, "", []string{"digests.max_delete", "got -5"}},
		{"fraction zero", []string{"--digests-max-delete-fraction=0"}, "", []string{"digests.max_delete_fraction", "got 0"}},
		{"fraction above one", []string{"--digests-max-delete-fraction=2"}, "", []string{"digests.max_delete_fraction", "got 2"}},
		{"max_body zero", []string{"--digests-max-body=0"}, "", []string{"digests.max_body", "1 byte or more"}},
		{"durations", []string{"--digests-trash-window=0s", "--digests-placement-grace=-1h", "--digests-tombstone-retention=0s", "--digests-rebuild-interval=-1s"}, "",
			[]string{"digests.trash_window", "digests.placement_grace", "digests.tombstone_retention", "digests.rebuild_interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, requiredFlags...), tt.args...)
			if tt.yaml != "" {
				args = append(args, "--config", writeFile(t, tt.yaml))
			}
			_, err := Load(args, nil)
			if err == nil {
				t.Fatal("Load accepted the configuration")
			}
			var ue *UsageError
			if errors.As(err, &ue) {
				t.Errorf("validation error reported as a usage error: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}

	// Layout says the same as Validate, for callers that build a Config
	// without Load.
	c := Defaults()
	c.Digests.Namespaces = []DigestNamespace{{Bucket: "reg"}}
	c.Digests.Sources = []DigestSource{{Bucket: "reg", Prefix: "m/"}}
	if _, err := c.Layout(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Errorf("Layout of overlapping places: %v", err)
	}
}

func TestDigestsInputErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--digests-namespace=/blobs/"}, "want BUCKET/PREFIX"},
		{[]string{"--digests-source", "a/b,/c"}, "want BUCKET/PREFIX"},
		{[]string{"--digests-verify=maybe"}, "digests-verify"},
		{[]string{"--digests-max-body=4MiB"}, "not a whole number"},
	} {
		_, err := Load(append(append([]string{}, requiredFlags...), tt.args...), nil)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%q) = %v, want a usage error mentioning %q", tt.args, err, tt.want)
		}
	}
	_, err := Load(requiredFlags, []string{"SWEEPGATE_DIGESTS_NAMESPACES=ok/b/,/nobucket"})
	if err == nil || !strings.Contains(err.Error(), "environment SWEEPGATE_DIGESTS_NAMESPACES") || !strings.Contains(err.Error(), `"/nobucket"`) {
		t.Errorf("bad environment: %v", err)
	}

	for _, tt := range []struct{ name, yaml, want string }{
		{"namespaces scalar", "digests:\n  namespaces: reg/b/\n", "digests.namespaces must be a list"},
		{"sources mapping", "digests:\n  sources: {bucket: reg}\n", "digests.sources must be a list"},
		{"item is a list", "digests:\n  namespaces: [[reg/b/]]\n", "each item must be a string BUCKET/PREFIX or a mapping"},
		{"item is null", "digests:\n  sources: [~]\n", "each item must be a string"},
		{"short form without bucket", "digests:\n  namespaces: [/b/]\n", "test.yaml:2:16: digests.namespaces: \"/b/\": want BUCKET/PREFIX"},
		{"unknown key", "digests:\n  namespaces: [{bucket: reg, max_body: 1}]\n", "unknown key max_body (want name, bucket, prefix, pattern, verify, content, confirm_blobs)"},
		{"source unknown key", "digests:\n  sources: [{bucket: reg, verify: true}]\n", "unknown key verify"},
		{"missing bucket", "digests:\n  sources: [{prefix: m/}]\n", "digests.sources: bucket is required"},
		{"verify not a bool", "digests:\n  namespaces: [{bucket: reg, verify: sometimes}]\n", `verify: "sometimes" is not a boolean`},
		{"max_body not a number", "digests:\n  sources: [{bucket: reg, max_body: 4MiB}]\n", `max_body: "4MiB" is not a whole number`},
		{"key twice", "digests:\n  sources: [{bucket: a, bucket: b}]\n", "bucket is set twice"},
		{"value is a list", "digests:\n  sources: [{bucket: [a]}]\n", "keys and values must be plain values"},
		{"alias item", "x: &n reg/b/\n", "unknown setting x"},
		{"anchored item", "digests:\n  namespaces: [&n reg/b/]\n", "anchors and aliases"},
		{"planes scalar", "digests:\n  planes: backup\n", "digests.planes must be a list"},
		{"misspelled group key", "digests:\n  trash-window: 1h\n", "did you mean digests.trash_window?"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := LoadYAML(Defaults(), []byte(tt.yaml), "test.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadYAML(%q) = %v, want it to contain %q", tt.yaml, err, tt.want)
			}
		})
	}
}

func TestCheckPlane(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"backup", "dr-west.1", "s3:replica", "Ünïcode"} {
		if err := CheckPlane(ok); err != nil {
			t.Errorf("CheckPlane(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a/b", "a b", "tab\tx", "nl\n", strings.Repeat("p", maxPlaneName+1)} {
		if err := CheckPlane(bad); err == nil {
			t.Errorf("CheckPlane(%q) accepted", bad)
		}
	}
}

// TestDigestsDocExamples loads the examples docs/configuration.md shows.
func TestDigestsDocExamples(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{"registry": registryExampleYAML, "lfs": lfsExampleYAML} {
		c := mustLoad(t, append(append([]string{}, requiredFlags...), "--config", writeFile(t, doc)), nil)
		l, err := c.Layout()
		if err != nil || l.Empty() {
			t.Fatalf("%s example: layout %v, %v", name, l, err)
		}
		bucket, blob, ref := "registry", "blobs/sha256/"+testHex, "manifests/app/v1.json"
		if name == "lfs" {
			bucket, blob, ref = "lfs", "lfs/objects/"+testHex[:2]+"/"+testHex[2:4]+"/"+testHex, "lfs/refs/repo/file.bin"
		}
		if _, d, ok := l.Namespace(bucket, blob); !ok || d != "sha256:"+testHex {
			t.Errorf("%s example: blob key %s gives %q, %t", name, blob, d, ok)
		}
		src := l.Source(bucket, ref)
		if src == nil {
			t.Fatalf("%s example: %s is in no source", name, ref)
		}
		body := "version https://git-lfs.github.com/spec/v1\noid sha256:" + testHex + "\nsize 12345\n"
		if got, err := src.Extract([]byte(body)); err != nil || len(got) != 1 {
			t.Errorf("%s example: a pointer file names %q, %v", name, got, err)
		}
	}
	if !strings.Contains(Markdown(), registryExampleYAML) || !strings.Contains(Markdown(), lfsExampleYAML) {
		t.Error("the examples are not in the document")
	}
}
