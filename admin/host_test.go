package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sweepgate/sweepgate/logbuf"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// apiTestToken is the admin token of the handlers testAdminHandler serves.
const apiTestToken = "api-test-admin-token-0123456789"

// loopbackHosts is the Host policy of an admin listener on 127.0.0.1,
// which httptest servers listen on, that also answers example.com, the
// Host of httptest.NewRequest.
func loopbackHosts() hostPolicy {
	return newHostPolicy("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, []string{"example.com"})
}

// testAdminHandler returns a's handler as serve runs it, with a token and
// the Host check of a loopback listener, for the tests of what the API
// answers rather than of who may ask: when a has no token, it gets
// apiTestToken, and requests without an Authorization header are given
// it on their way in.
func testAdminHandler(a *handler) http.Handler {
	if a.hosts.names == nil {
		a.hosts = loopbackHosts()
	}
	if a.token != "" && a.token != apiTestToken {
		return a.mux()
	}
	a.token = apiTestToken
	h := a.mux()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			r.Header.Set("Authorization", "Bearer "+apiTestToken)
		}
		h.ServeHTTP(w, r)
	})
}

func TestHostPolicy(t *testing.T) {
	t.Parallel()
	hostname, _ := os.Hostname()
	tcp := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name          string
		listen        string
		bound         net.Addr
		extra         []string
		allow, refuse []string
	}{
		{
			name: "loopback", listen: "127.0.0.1:9001", bound: tcp("127.0.0.1:9001"),
			allow: []string{"127.0.0.1:9001", "127.0.0.1", "127.0.0.1:80", "localhost:9001", "LOCALHOST", "localhost.",
				"[::1]:9001", "[::1]", "127.0.0.2:9001", "[::ffff:127.0.0.1]:9001", ""},
			refuse: []string{"evil.example:9001", "evil.example", "10.0.0.7:9001", "[2001:db8::1]:9001",
				"localhost.evil.example", "127.0.0.1.nip.io:9001", ":9001", hostname + ".invalid"},
		},
		{
			name: "loopback by name", listen: "localhost:9001", bound: tcp("127.0.0.1:9001"),
			allow:  []string{"localhost:9001", "127.0.0.1:9001"},
			refuse: []string{"evil.example"},
		},
		{
			name: "IPv6 loopback", listen: "[::1]:9001", bound: tcp("[::1]:9001"),
			allow:  []string{"[::1]:9001", "localhost:9001", "127.0.0.1:9001"},
			refuse: []string{"evil.example:9001"},
		},
		{
			name: "one address", listen: "10.0.0.7:9001", bound: tcp("10.0.0.7:9001"),
			allow:  []string{"10.0.0.7:9001", "10.0.0.7"},
			refuse: []string{"localhost:9001", "127.0.0.1:9001", "10.0.0.8:9001", "evil.example:9001"},
		},
		{
			name: "every address", listen: ":9001", bound: tcp("0.0.0.0:9001"),
			allow:  []string{"10.0.0.7:9001", "192.0.2.1", "127.0.0.1:9001", "[2001:db8::1]:9001", "localhost:9001", hostname + ":9001", strings.ToUpper(hostname)},
			refuse: []string{"evil.example:9001", "sweepgate.evil.example"},
		},
		{
			name: "every address, by admin.hosts", listen: "0.0.0.0:9001", bound: tcp("0.0.0.0:9001"), extra: []string{"admin.internal", "sweepgate1"},
			allow:  []string{"admin.internal:9001", "Admin.Internal.", "sweepgate1:9001", "10.1.2.3:9001"},
			refuse: []string{"admin.internal.evil.example", "evil.example"},
		},
		{
			name: "a name", listen: "gw.internal:9001", bound: tcp("10.0.0.7:9001"),
			allow:  []string{"gw.internal:9001", "10.0.0.7:9001"},
			refuse: []string{"localhost:9001", "evil.example:9001"},
		},
		{
			name: "the zero policy", listen: "", bound: nil,
			allow:  []string{""},
			refuse: []string{"127.0.0.1:9001", "localhost"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := hostPolicy{}
			if tt.bound != nil {
				p = newHostPolicy(tt.listen, tt.bound, tt.extra)
			}
			for _, h := range tt.allow {
				if !p.allows(h) {
					t.Errorf("Host %q refused, want it allowed", h)
				}
			}
			for _, h := range tt.refuse {
				if p.allows(h) {
					t.Errorf("Host %q allowed, want it refused", h)
				}
			}
		})
	}
}

// TestAdminRefusesForeignHost: a request addressed to another name is
// refused with 403 before anything else looks at it, with the token or
// without, on every path of the admin listener, and the refusal is logged.
func TestAdminRefusesForeignHost(t *testing.T) {
	t.Parallel()
	logs := &logbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	a := &handler{
		registry: prometheus.NewRegistry(),
		draining: new(atomic.Bool),
		sessions: sessionsAPI{log: log},
		token:    testToken,
		hosts:    newHostPolicy("127.0.0.1:0", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, nil),
		log:      log,
	}
	srv := httptest.NewServer(a.mux())
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))

	do := func(method, path, host, auth string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	foreign := "rebound.evil.example:" + port
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/v1/sessions"}, {"POST", "/admin/v1/reclaim/run"}, {"POST", "/admin/v1/reclaim/orphans/delete"},
		{"POST", "/admin/v1/frontiers/p"}, {"GET", "/"}, {"GET", "/status"}, {"GET", "/login"}, {"POST", "/login"},
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/metrics"}, {"GET", "/nothing-here"},
	} {
		for _, auth := range []string{"", "Bearer " + testToken} {
			code, body := do(c.method, c.path, foreign, auth)
			var doc adminapi.ErrorBody
			if code != http.StatusForbidden || json.Unmarshal(body, &doc) != nil || doc.Error.Code != adminapi.CodeHostNotAllowed {
				t.Errorf("%s %s with Host %s, Authorization %q: %d %s, want 403 %s", c.method, c.path, foreign, auth, code, body, adminapi.CodeHostNotAllowed)
			}
		}
	}
	// The listener's own names: the probes are open, the API wants the
	// token.
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port} {
		if code, body := do("GET", "/healthz", host, ""); code != http.StatusOK {
			t.Errorf("GET /healthz with Host %s: %d %s", host, code, body)
		}
		if code, body := do("GET", "/admin/v1/sessions", host, ""); code != http.StatusUnauthorized {
			t.Errorf("GET /admin/v1/sessions with Host %s and no token: %d %s, want 401", host, code, body)
		}
		if code, body := do("GET", "/admin/v1/sessions", host, "Bearer "+testToken); code != http.StatusServiceUnavailable {
			t.Errorf("GET /admin/v1/sessions with Host %s and the token: %d %s, want it through (503: sessions off)", host, code, body)
		}
	}
	if !strings.Contains(logs.String(), "its Host is not this listener's") || !strings.Contains(logs.String(), "rebound.evil.example") {
		t.Errorf("refusals are not logged with the Host:\n%s", logs)
	}
}
