package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestBackendIdentities loads identities from YAML (a secret and a secret
// file) and from the flag, and the credentials that name them.
func TestBackendIdentities(t *testing.T) {
	t.Parallel()
	secretFile := filepath.Join(t.TempDir(), "writer.secret")
	if err := os.WriteFile(secretFile, []byte("  writer-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, `
backend:
  identities:
    - {name: reader, access_key: AKREADER, secret_key: "reader:secret"}
    - {name: writer, access_key: AKWRITER, secret_key_file: `+secretFile+`}
credentials:
  - {access_key: ro, secret_key: ro-secret, backend: reader}
  - {access_key: rw, secret_key: rw-secret, principal: alice, backend: writer}
  - {access_key: plain, secret_key: plain-secret}
reclaim:
  backend_identity: writer
  buckets: [a, b]
`)
	c := mustLoad(t, append([]string{"--config", path}, requiredFlags...), nil)
	want := []BackendIdentity{
		{Name: "reader", AccessKey: "AKREADER", SecretKey: "reader:secret"},
		{Name: "writer", AccessKey: "AKWRITER", SecretKey: "writer-secret", SecretKeyFile: secretFile},
	}
	if !reflect.DeepEqual(c.Backend.Identities, want) {
		t.Errorf("identities = %#v, want %#v", c.Backend.Identities, want)
	}
	var backends []string
	for _, cr := range c.ClientCredentials() {
		backends = append(backends, cr.AccessKey+"="+cr.Backend)
	}
	if got := strings.Join(backends, " "); got != "ro=reader rw=writer plain= AKBACKEND=" {
		t.Errorf("credential backends = %s", got)
	}
	if c.Reclaim.BackendIdentity != "writer" || !reflect.DeepEqual(c.Reclaim.Buckets, []string{"a", "b"}) {
		t.Errorf("reclaim = %q %v", c.Reclaim.BackendIdentity, c.Reclaim.Buckets)
	}

	c = mustLoad(t, append([]string{"--backend-identity=ops:AKOPS:x:y", "--reclaim-backend-identity=ops"}, requiredFlags...), nil)
	if want := []BackendIdentity{{Name: "ops", AccessKey: "AKOPS", SecretKey: "x:y"}}; !reflect.DeepEqual(c.Backend.Identities, want) {
		t.Errorf("flag identities = %#v, want %#v", c.Backend.Identities, want)
	}
}

// TestBackendIdentityErrors refuses, at load, names that name nothing or
// the default twice, and a secret file that cannot be read, without
// printing any secret.
func TestBackendIdentityErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such.secret")
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown backend", "credentials: [{access_key: ro, secret_key: topsecret1, backend: nobody}]\n",
			[]string{`access key "ro" names backend identity "nobody", which backend.identities does not list`}},
		{"default reused", "backend: {identities: [{name: default, access_key: AK2, secret_key: topsecret1}]}\n",
			[]string{`"default" names backend.access_key and backend.secret_key`}},
		{"twice", "backend: {identities: [{name: r, access_key: AK2, secret_key: topsecret1}, {name: r, access_key: AK3, secret_key: topsecret2}]}\n",
			[]string{`"r" is listed twice`}},
		{"unknown reclaimer identity", "reclaim: {backend_identity: nobody}\n",
			[]string{`reclaim.backend_identity (--reclaim-backend-identity, SWEEPGATE_RECLAIM_BACKEND_IDENTITY): "nobody" is not a backend identity`}},
		{"missing secret file", "backend: {identities: [{name: r, access_key: AK2, secret_key_file: " + missing + "}]}\n",
			[]string{"r: secret_key_file: open " + missing}},
		{"both secrets", "backend: {identities: [{name: r, access_key: AK2, secret_key: topsecret1, secret_key_file: " + missing + "}]}\n",
			[]string{"identity r needs secret_key or secret_key_file, not both"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			_, err := Load(append([]string{"--config", path}, requiredFlags...), nil)
			if err == nil {
				t.Fatal("loaded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Errorf("error %q shows a secret", err)
			}
		})
	}
	_, err := Load(append([]string{"--backend-identity=ops:AKOPS"}, requiredFlags...), nil)
	if err == nil || !strings.Contains(err.Error(), "want NAME:ACCESS_KEY:SECRET") {
		t.Errorf("malformed flag: %v", err)
	}
}
