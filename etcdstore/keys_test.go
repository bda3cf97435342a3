package etcdstore

import (
	"sort"
	"strings"
	"testing"
)

func TestNewKeysNormalizesPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/sweepgate/", "/sweepgate/", true},
		{"/sweepgate", "/sweepgate/", true},
		{"tenant-a", "tenant-a/", true},
		{"", "", false},
		{"a\x00b", "", false},
	}
	for _, tt := range tests {
		k, err := NewKeys(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("NewKeys(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && k.Prefix != tt.want {
			t.Errorf("NewKeys(%q).Prefix = %q, want %q", tt.in, k.Prefix, tt.want)
		}
	}
	if got := (Keys{}).Root(); got != DefaultPrefix {
		t.Errorf("zero Keys Root() = %q, want %q", got, DefaultPrefix)
	}
}

func TestKeysLayout(t *testing.T) {
	t.Parallel()
	k := Keys{Prefix: "/sg"}
	tests := []struct{ got, want string }{
		{k.Session("photos", "abc"), "/sg/sessions/photos/abc"},
		{k.Sessions("photos"), "/sg/sessions/photos/"},
		{k.Part("abc", 7), "/sg/parts/abc/00007"},
		{k.Part("abc", 10000), "/sg/parts/abc/10000"},
		{k.Parts("abc"), "/sg/parts/abc/"},
		// A '/' in an ID is escaped, so "a/b" cannot fall under "a"'s prefix.
		{k.Session("photos", "a/b"), "/sg/sessions/photos/a%2Fb"},
		{k.Parts("a/b"), "/sg/parts/a%2Fb/"},
		{k.Gateway("host@127.0.0.1:9001"), "/sg/gateways/host@127.0.0.1:9001"},
		{k.Gateway("a/b"), "/sg/gateways/a%2Fb"},
		{k.ElapsedClock(), "/sg/reclaim/clock"},
		{k.InFlightPart("a/b", "r1"), "/sg/inflight/a%2Fb/r1"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if strings.HasPrefix(k.Part("a/b", 1), k.Parts("a")) {
		t.Error("a part of upload a/b falls under upload a's prefix")
	}
	if strings.HasPrefix(k.InFlightPart("a/b", "r"), k.InFlight("a")) {
		t.Error("a part in flight of upload a/b falls under upload a's prefix")
	}
	for _, key := range []string{k.Session("b", "u"), k.Part("u", 1)} {
		if !strings.HasPrefix(key, k.Root()) {
			t.Errorf("%q is outside the prefix %q", key, k.Root())
		}
	}
}

func TestPartKeysSortNumerically(t *testing.T) {
	t.Parallel()
	k := Keys{}
	nums := []int{10000, 2, 10, 1, 999, 100}
	keys := make([]string, len(nums))
	for i, n := range nums {
		keys[i] = k.Part("u", n)
	}
	sort.Strings(keys)
	sort.Ints(nums)
	for i, n := range nums {
		if keys[i] != k.Part("u", n) {
			t.Fatalf("lexical order %v does not follow numeric order %v", keys, nums)
		}
	}
}
