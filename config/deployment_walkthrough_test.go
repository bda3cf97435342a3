package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// walkthroughHeading starts docs/deployment.md's deployment walk-through.
const walkthroughHeading = "## From an empty machine to three gateways and three etcd members"

// walkthroughYAML returns the YAML blocks of docs/deployment.md's deployment
// walk-through, in order.
func walkthroughYAML(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "deployment.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), walkthroughHeading+"\n")
	if !ok {
		t.Fatalf("docs/deployment.md has no section %q", walkthroughHeading)
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```yaml\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatal("docs/deployment.md: a yaml block of the walk-through is not closed")
		}
		blocks = append(blocks, block)
		section = after
	}
}

// TestDeploymentWalkthrough checks the walk-through's files as sweepgate reads
// them: its credentials file parses, its configuration loads with only
// real settings, and it keeps the production set-up it describes (TLS and
// authentication to etcd, HTTPS only for clients, secrets from files, a
// backend identity per client, a scoped reclaimer).
func TestDeploymentWalkthrough(t *testing.T) {
	t.Parallel()
	blocks := walkthroughYAML(t)
	if len(blocks) != 2 {
		t.Fatalf("the walk-through has %d yaml blocks, want 2 (credentials file, configuration)", len(blocks))
	}
	credsFile := filepath.Join(t.TempDir(), "credentials.yaml")
	if err := os.WriteFile(credsFile, []byte(blocks[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := readCredentialsFile(credsFile)
	if err != nil {
		t.Fatalf("the walk-through's credentials file: %v", err)
	}
	c := Defaults()
	if err := LoadYAML(c, []byte(blocks[1]), "docs/deployment.md walk-through"); err != nil {
		t.Fatalf("the walk-through's configuration: %v", err)
	}
	identities := map[string]bool{}
	for _, id := range c.Backend.Identities {
		identities[id.Name] = id.SecretKeyFile != ""
	}
	for _, cr := range creds {
		if !identities[cr.Backend] {
			t.Errorf("credential %s names backend identity %q, which the configuration lacks or gives no secret file", cr.AccessKey, cr.Backend)
		}
	}
	checks := []struct {
		what string
		ok   bool
	}{
		{"etcd over TLS with a client certificate", c.Etcd.CAFile != "" && c.Etcd.CertFile != "" && c.Etcd.KeyFile != ""},
		{"etcd authentication", c.Etcd.Username != "" && c.Etcd.PasswordFile != ""},
		{"three etcd endpoints over https", len(c.Etcd.Endpoints) == 3 && strings.HasPrefix(c.Etcd.Endpoints[0], "https://")},
		{"HTTPS only for clients", c.Listen == "" && c.TLSListen != "" && c.TLSCertFile != ""},
		{"secrets from files", c.Backend.SecretKey == "" && c.Backend.SecretKeyFile != "" && c.CredentialsFile != "" && c.Admin.TokenFile != ""},
		{"no client signs as the backend's own key", !c.AcceptBackendCredentials},
		{"a scoped reclaimer", len(c.Reclaim.Buckets) > 0},
		{"the backend over https with its CA", strings.HasPrefix(c.Backend.Endpoint, "https://") && c.Backend.CAFile != ""},
	}
	for _, ch := range checks {
		if !ch.ok {
			t.Errorf("the walk-through's configuration lost %s", ch.what)
		}
	}
}
