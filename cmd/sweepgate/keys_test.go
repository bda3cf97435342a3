package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/gateway"
)

// TestGatewayKeysReload builds a gateway as serve does and installs the
// key set of a configuration loaded again, as a reload does: the
// identities, the credentials naming them and the reclaimer's identity
// are all accepted by Gateway.SetKeys, which installs the identities in
// the backend client too.
func TestGatewayKeysReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	load := func(writerSecret string) *config.Config {
		t.Helper()
		secretFile := filepath.Join(dir, "writer.secret")
		if err := os.WriteFile(secretFile, []byte(writerSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "sweepgate.yaml")
		yaml := `
backend:
  endpoint: http://127.0.0.1:1
  access_key: root
  secret_key: root-secret
  identities:
    - {name: reader, access_key: reader, secret_key: reader-secret}
    - {name: writer, access_key: writer, secret_key_file: ` + secretFile + `}
credentials:
  - {access_key: ro, secret_key: ro-secret, backend: reader}
  - {access_key: rw, secret_key: rw-secret, backend: writer}
reclaim: {backend_identity: reader, buckets: [a]}
`
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load([]string{"--config", path}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := load("writer-secret-1")
	be, err := newBackendClient(cfg, time.Now, nil)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Backend: be, Credentials: gatewayCredentials(cfg.ClientCredentials())})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := gatewayKeys(load("writer-secret-2"), be)
	if err != nil {
		t.Fatal(err)
	}
	if got := keys.Identities.Signer("writer").SecretKey; got != "writer-secret-2" {
		t.Errorf("writer's secret after the reload = %q", got)
	}
	if err := gw.SetKeys(keys); err != nil {
		t.Fatalf("SetKeys with the reloaded configuration: %v", err)
	}
	if got := be.Identities().Background().AccessKey; got != "reader" {
		t.Errorf("background identity after the reload signs as %q, want reader (reclaim.backend_identity)", got)
	}
}
