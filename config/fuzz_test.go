package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// FuzzLoadYAML checks that no YAML document, however hostile, makes loading
// or validating panic, and that a document that loads leaves a Config whose
// printing (String, %#v and its slog value) still hides the secrets: no
// secret the document set appears in it more often than it does by chance in
// the printing of the same Config with other secrets, and the printing does
// not depend on the secrets' values at all.
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
		secrets := secretsOf(c)
		if len(secrets) == 0 {
			_ = c.String()
		} else {
			out, other := printed(c), printed(withSecrets(c, "fuzz-other-secret"))
			for _, secret := range secrets {
				if n, m := strings.Count(out, string(secret)), strings.Count(other, string(secret)); n > m {
					t.Fatalf("secret %q appears %d times in the printed config, %d with other secrets:\n%s", string(secret), n, m, out)
				}
			}
			if out != other {
				t.Fatalf("the printed config depends on the secrets' values:\n%s\nwith other secrets:\n%s", out, other)
			}
		}
		_ = c.ClientCredentials()
		_, _ = c.Layout()
	})
}

// secretsOf returns the non-empty secrets c holds.
func secretsOf(c *Config) []Secret {
	all := []Secret{c.Backend.SecretKey, c.Admin.Token}
	for _, cr := range c.Credentials {
		all = append(all, cr.SecretKey)
	}
	return slices.DeleteFunc(all, func(s Secret) bool { return s == "" })
}

// withSecrets returns a copy of c with each of its non-empty secrets
// replaced by s.
func withSecrets(c *Config, s Secret) *Config {
	swap := func(v Secret) Secret {
		if v == "" {
			return v
		}
		return s
	}
	cp := *c
	cp.Backend.SecretKey = swap(cp.Backend.SecretKey)
	cp.Admin.Token = swap(cp.Admin.Token)
	cp.Credentials = slices.Clone(cp.Credentials)
	for i := range cp.Credentials {
		cp.Credentials[i].SecretKey = swap(cp.Credentials[i].SecretKey)
	}
	return &cp
}

// printed is c as each of its printings shows it: String (which fmt's %v
// and %+v call), %#v, and its slog value.
func printed(c *Config) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%v\n%#v\n", c, c)
	noTime := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}
	slog.New(slog.NewTextHandler(&b, noTime)).Info("config", "config", c)
	return b.String()
}
