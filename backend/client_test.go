package backend

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
)

func TestPath(t *testing.T) {
	tests := []struct {
		bucket, key  string
		path, rawURL string
	}{
		{"", "", "/", "/"},
		{"b", "", "/b", "/b"},
		{"b", "dir/file.txt", "/b/dir/file.txt", "/b/dir/file.txt"},
		{"b", "a b+c=d&e~f", "/b/a b+c=d&e~f", "/b/a%20b%2Bc%3Dd%26e~f"},
		{"b", "ሴ", "/b/ሴ", "/b/%E1%88%B4"},
		{"b", "./../x", "/b/./../x", "/b/./../x"},
	}
	for _, tt := range tests {
		path, raw := Path(tt.bucket, tt.key)
		if path != tt.path || raw != tt.rawURL {
			t.Errorf("Path(%q, %q) = %q, %q; want %q, %q", tt.bucket, tt.key, path, raw, tt.path, tt.rawURL)
		}
	}
}

// TestSignerChoice: a call for a verified request is signed with the
// signer its Caller carries, even after SetIdentities installed another key
// for that identity; a call for a request not yet verified is refused; a
// call outside any request gets the background identity installed now.
func TestSignerChoice(t *testing.T) {
	t.Parallel()
	first, err := NewIdentities(map[string]Key{DefaultIdentity: {AccessKey: "root", SecretKey: "root-1"}, "writer": {AccessKey: "w", SecretKey: "w-1"}}, "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{Endpoint: "http://127.0.0.1:1", Identities: first})
	if err != nil {
		t.Fatal(err)
	}
	during := &Caller{Signer: first.Signer("writer")}
	second, err := NewIdentities(map[string]Key{DefaultIdentity: {AccessKey: "root", SecretKey: "root-2"}, "writer": {AccessKey: "w", SecretKey: "w-2"}}, "", "", first)
	if err != nil {
		t.Fatal(err)
	}
	c.SetIdentities(second)
	signer := func(caller *Caller) (*sigv4.Signer, error) {
		ctx := context.Background()
		if caller != nil {
			ctx = WithCaller(ctx, caller)
		}
		req := httptest.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/b", nil)
		return c.signer(req)
	}
	if s, err := signer(during); err != nil || s.SecretKey != "w-1" {
		t.Errorf("a request verified before SetIdentities signs with %+v, %v; want the writer key it started with", s, err)
	}
	if _, err := signer(&Caller{}); !errors.Is(err, ErrNotAuthenticated) {
		t.Errorf("a request not verified: %v, want ErrNotAuthenticated", err)
	}
	if s, err := signer(nil); err != nil || s.AccessKey != "root" || s.SecretKey != "root-2" {
		t.Errorf("a background call signs with %+v, %v; want the default identity installed now", s, err)
	}
}

// TestNotAuthenticatedIsNotSent: a call whose Caller has no signer never
// reaches the backend.
func TestNotAuthenticatedIsNotSent(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	defer srv.Close()
	c, err := NewStatic(srv.URL, "", "k", "s")
	if err != nil {
		t.Fatal(err)
	}
	req, err := c.NewRequest(WithCaller(context.Background(), &Caller{RequestID: "r1"}), http.MethodGet, "b", "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RoundTrip(req); !errors.Is(err, ErrNotAuthenticated) {
		t.Errorf("RoundTrip = %v, want ErrNotAuthenticated", err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the backend was called %d times", n)
	}
}

// TestClientAddrHeader: a call made for a client request carries the
// client's address in X-Forwarded-For, alone, whatever source-address
// headers the request held before; a background call carries none.
func TestClientAddrHeader(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	c, err := NewStatic(srv.URL, "", "k", "s")
	if err != nil {
		t.Fatal(err)
	}
	signer := c.Identities().Background()
	for _, tc := range []struct {
		caller *Caller
		want   []string
	}{
		{&Caller{RequestID: "r1", Signer: signer, ClientAddr: "192.0.2.7"}, []string{"192.0.2.7"}},
		{&Caller{RequestID: "r2", Signer: signer}, nil},
		{nil, nil},
	} {
		ctx := context.Background()
		if tc.caller != nil {
			ctx = WithCaller(ctx, tc.caller)
		}
		req, err := c.NewRequest(ctx, http.MethodGet, "b", "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-For", "10.9.9.9")
		req.Header.Add("X-Forwarded-For", "10.9.9.8")
		req.Header.Set("X-Real-Ip", "10.9.9.9")
		req.Header.Set("Forwarded", "for=10.9.9.9")
		req.Header.Set("X-Forwarded-Host", "other-bucket.example.com")
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := <-got
		if xff := h.Values("X-Forwarded-For"); !slices.Equal(xff, tc.want) {
			t.Errorf("caller %+v: X-Forwarded-For %q, want %q", tc.caller, xff, tc.want)
		}
		for _, name := range []string{"X-Real-Ip", "Forwarded", "X-Forwarded-Host", "X-Forwarded-Proto"} {
			if v := h.Get(name); v != "" {
				t.Errorf("caller %+v: the request's own %s %q reached the backend", tc.caller, name, v)
			}
		}
	}
}
