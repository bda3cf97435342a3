package config

import (
	"strings"
	"testing"
)

// FuzzLoadYAML checks that no YAML document, however hostile, makes loading
// or validating panic, and that a document that loads leaves a Config whose
// printing still hides the secrets.
func FuzzLoadYAML(f *testing.F) {
	seeds := []string{
		ExampleYAML(),
		"",
		"~",
		"listen: :9000\n",
		"backend:\n  endpoint: http://127.0.0.1:9100\n  secret_key: s\n",
		"credentials:\n  - {access_key: a, secret_key: b, principal: c}\n",
		"credentials: [[a]]\n",
		"domains: [a, [b], {c: d}]\n",
		"unknown: 1\n",
		"a: &a [*a]\n",
		"x: &x\n  y: *x\n<<: *x\n",
		"lol: &a [1,1,1,1,1,1,1,1]\nlol2: &b [*a,*a,*a,*a,*a,*a,*a,*a]\nlol3: [*b,*b,*b,*b,*b,*b,*b,*b]\n",
		"etcd:\n  embedded:\n    embedded:\n      x: 1\n",
		"? [a, b]\n: c\n",
		"!!binary aGVsbG8=: x\n",
		"max_clock_skew: 9999999999999999999h\n",
		"etcd: {embedded: {quota_backend_bytes: 99999999999999999999}}\n",
		"---\n---\n",
		"\t- not yaml",
		strings.Repeat("[", 5000),
		strings.Repeat("a:\n  ", 500) + "b",
		"listen: \"\\u0000\"\n",
		registryExampleYAML,
		lfsExampleYAML,
		"digests:\n  namespaces: [{bucket: a, pattern: '(?P<hex>'}, [x], ~]\n  sources: [{bucket: a, max_body: -1}]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Defaults()
		if err := LoadYAML(c, data, "fuzz.yaml"); err != nil {
			return
		}
		c.normalize()
		_ = c.Validate()
		_ = c.String()
		_ = c.ClientCredentials()
		_, _ = c.Layout()
	})
}
