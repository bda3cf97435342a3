package gateway

import (
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/sweepgate/sweepgate/backend"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/multipart"
)

// testParts is what a test's gateway is built from, in the order serve's
// wiring builds it: the backend client, the session service over it, the
// digest service over both, and the gateway over all three.
type testParts struct {
	Endpoint, Region, AccessKey, SecretKey string
	// Identities are backend identities besides backend.DefaultIdentity
	// (AccessKey, SecretKey); Background names the background one.
	Identities map[string]backend.Key
	Background string
	// Sessions, when set, turns sessions on: its Backend, Now, Logger and
	// Metrics are filled in from the gateway's.
	Sessions *multipart.Config
	// Digests, when set, turns digest reclamation on: its Backend,
	// Sessions, Parts, Now, Logger and Metrics are filled in.
	Digests *digests.ServiceConfig
	// Tracer, when set, is the backend client's and the gateway's tracer
	// (Config.Tracer).
	Tracer trace.Tracer
}

// newTestGateway builds the gateway of cfg over p's parts, and runs its
// digest service's guard watch until the test ends.
func newTestGateway(t testing.TB, p testParts, cfg Config) *Gateway {
	t.Helper()
	keys := map[string]backend.Key{backend.DefaultIdentity: {AccessKey: p.AccessKey, SecretKey: p.SecretKey}}
	for name, k := range p.Identities {
		keys[name] = k
	}
	ids, err := backend.NewIdentities(keys, p.Background, p.Region, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backend, err = backend.New(backend.Config{Endpoint: p.Endpoint, Identities: ids, Now: cfg.Now, Tracer: p.Tracer})
	cfg.Tracer = p.Tracer
	if err != nil {
		t.Fatal(err)
	}
	if sc := p.Sessions; sc != nil {
		sc.Backend, sc.Now, sc.Logger, sc.Metrics = cfg.Backend, cfg.Now, cfg.Logger, cfg.Metrics
		if cfg.Sessions, err = multipart.New(*sc); err != nil {
			t.Fatal(err)
		}
	}
	if dc := p.Digests; dc != nil {
		dc.Backend, dc.Sessions, dc.Now, dc.Logger, dc.Metrics = cfg.Backend, cfg.Sessions, cfg.Now, cfg.Logger, cfg.Metrics
		if p.Sessions != nil {
			dc.Parts = p.Sessions.Store
		}
		if cfg.Digests, err = digests.NewService(*dc); err != nil {
			t.Fatal(err)
		}
		go cfg.Digests.Run(t.Context())
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
