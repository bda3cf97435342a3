package clientip

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func TestParseTrusted(t *testing.T) {
	good := map[string][]string{
		"10.0.0.0/8":        {"10.0.0.1", "10.255.255.255"},
		"192.0.2.7":         {"192.0.2.7"},
		"2001:db8::/32":     {"2001:db8::1", "2001:db8:ffff::"},
		"::1":               {"::1"},
		"192.0.2.77/24":     {"192.0.2.1"}, // masked to 192.0.2.0/24
		" 198.51.100.0/30 ": {"198.51.100.3"},
	}
	outside := map[string][]string{
		"10.0.0.0/8":    {"11.0.0.1", "::ffff:11.0.0.1", "2001:db8::1"},
		"192.0.2.7":     {"192.0.2.8"},
		"2001:db8::/32": {"2001:db9::1", "10.0.0.1"},
		"::1":           {"127.0.0.1"},
	}
	for s, ins := range good {
		tr, err := ParseTrusted([]string{s})
		if err != nil {
			t.Fatalf("ParseTrusted(%q): %v", s, err)
		}
		for _, a := range ins {
			if !tr.Contains(netip.MustParseAddr(a)) {
				t.Errorf("%q does not contain %s", s, a)
			}
		}
		for _, a := range outside[s] {
			if tr.Contains(netip.MustParseAddr(a)) {
				t.Errorf("%q contains %s", s, a)
			}
		}
	}
	if tr, _ := ParseTrusted([]string{"10.0.0.0/8"}); !tr.Contains(netip.MustParseAddr("::ffff:10.1.2.3")) {
		t.Error("an IPv4-mapped IPv6 address is not taken as its IPv4 address")
	}
	for _, bad := range []string{"", "10.0.0.0/33", "10.0.0", "example.com", "fe80::1%eth0", "fe80::/10%eth0", "10.0.0.0/8/8", "::/129"} {
		if _, err := ParseTrusted([]string{"10.0.0.0/8", bad}); err == nil {
			t.Errorf("ParseTrusted accepted %q", bad)
		}
	}
	var none Trusted
	if none.Contains(netip.MustParseAddr("127.0.0.1")) || !none.Empty() {
		t.Error("the zero Trusted trusts someone")
	}
}

// TestResolveModel compares Resolve, on generated peers and headers, with
// the walk written the plainest way: every hop in order, the peer last,
// and from the right the first one that is not trusted.
func TestResolveModel(t *testing.T) {
	tr, err := ParseTrusted([]string{"10.0.0.0/8", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	pool := []string{"10.0.0.1", "10.9.9.9", "192.0.2.1", "198.51.100.2", "2001:db8::5", "2001:db9::5", "[2001:db8::7]", "192.0.2.3:443", "[2001:db9::8]:80", "unknown", "", "::ffff:10.2.2.2"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		peer := netip.MustParseAddr([]string{"10.0.0.9", "192.0.2.200", "2001:db8::9", "2001:db9::9"}[rng.IntN(4)])
		var headers []string
		for range rng.IntN(3) {
			var entries []string
			for range 1 + rng.IntN(3) {
				entries = append(entries, pool[rng.IntN(len(pool))])
			}
			sep := []string{",", ", ", " , "}[rng.IntN(3)]
			headers = append(headers, strings.Join(entries, sep))
		}
		got, want := tr.Resolve(peer, headers), modelResolve(tr, peer, headers)
		if got != want {
			t.Fatalf("case %d: peer %s, X-Forwarded-For %q: Resolve = %s, model = %s", i, peer, headers, got, want)
		}
	}
}

func modelResolve(tr Trusted, peer netip.Addr, headers []string) netip.Addr {
	if !tr.Contains(peer) {
		return peer
	}
	var hops []string
	for _, h := range headers {
		if strings.TrimSpace(h) == "" {
			continue
		}
		for _, e := range strings.Split(h, ",") {
			hops = append(hops, strings.TrimSpace(e))
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		s := strings.TrimPrefix(strings.TrimSuffix(hops[i], "]"), "[")
		a, err := netip.ParseAddr(s)
		if err != nil {
			ap, err2 := netip.ParseAddrPort(hops[i])
			if err2 != nil {
				return client
			}
			a = ap.Addr()
		}
		client = a.Unmap()
		if !tr.Contains(client) {
			return client
		}
	}
	return client
}

func TestResolveExamples(t *testing.T) {
	tr, _ := ParseTrusted([]string{"10.0.0.0/8"})
	for _, c := range []struct {
		peer string
		xff  []string
		want string
	}{
		{"192.0.2.1", []string{"198.51.100.1"}, "192.0.2.1"},                       // untrusted peer: its header is ignored
		{"10.0.0.1", []string{"198.51.100.1"}, "198.51.100.1"},                     // one trusted proxy
		{"10.0.0.1", []string{"203.0.113.9, 198.51.100.1"}, "198.51.100.1"},        // the client's own entry on the left is not believed
		{"10.0.0.1", []string{"198.51.100.1, 10.0.0.2"}, "198.51.100.1"},           // two trusted proxies
		{"10.0.0.1", []string{"198.51.100.1", "10.0.0.2"}, "198.51.100.1"},         // across header lines
		{"10.0.0.1", nil, "10.0.0.1"},                                              // a trusted peer without the header
		{"10.0.0.1", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},                   // all trusted: the left-most
		{"10.0.0.1", []string{"198.51.100.1, garbage, 10.0.0.2"}, "10.0.0.2"},      // nobody vouches past an entry that does not parse
		{"10.0.0.1", []string{"[2001:db8::1]:443"}, "2001:db8::1"},                 // bracketed with a port
		{"::ffff:10.0.0.1", []string{"::ffff:198.51.100.1"}, "198.51.100.1"},       // mapped addresses
		{"10.0.0.1", []string{"198.51.100.1,   "}, "10.0.0.1"},                     // an empty entry stops the walk
		{"10.0.0.1", []string{"", "198.51.100.1"}, "198.51.100.1"},                 // an empty header line adds no hop
		{"10.0.0.1", []string{"198.51.100.1:8080, 10.0.0.2:1234"}, "198.51.100.1"}, // ports
	} {
		got := tr.Resolve(netip.MustParseAddr(c.peer), c.xff)
		if got.String() != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: got %s, want %s", c.peer, c.xff, got, c.want)
		}
	}
}

func TestPeerAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:5000":          "192.0.2.1",
		"[2001:db8::1]:80":        "2001:db8::1",
		"[::ffff:192.0.2.1]:1":    "192.0.2.1",
		"[fe80::1%eth0]:80":       "fe80::1",
		"192.0.2.1":               "192.0.2.1",
		"pipe":                    "invalid IP",
		fmt.Sprint("@unix", ":1"): "invalid IP",
	} {
		if got := PeerAddr(in).String(); got != want {
			t.Errorf("PeerAddr(%q) = %s, want %s", in, got, want)
		}
	}
}
