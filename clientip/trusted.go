// Package clientip resolves the address of the client behind a request:
// the direct peer of a connection, the source a trusted load balancer
// names in a PROXY protocol header (proxyproto.go), and the X-Forwarded-For
// entries that trusted proxies appended. An address only counts when
// every hop that vouches for it is trusted: a client that sends its own
// forwarding header, or its own PROXY header, cannot choose its address.
package clientip

import (
	"fmt"
	"net/netip"
	"strings"
)

// Trusted is a set of proxy addresses, given as CIDR prefixes. The zero
// value trusts nobody.
type Trusted struct {
	prefixes []netip.Prefix
}

// ParseTrusted parses a list of CIDR prefixes (192.0.2.0/24, 2001:db8::/32)
// or single addresses (a /32 or /128). An empty list trusts nobody.
func ParseTrusted(list []string) (Trusted, error) {
	var t Trusted
	for _, s := range list {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return Trusted{}, err
		}
		t.prefixes = append(t.prefixes, p)
	}
	return t, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q: not a CIDR prefix such as 10.0.0.0/8", s)
		}
		if p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("trusted proxy %q: a prefix has no zone", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("trusted proxy %q: not an address or a CIDR prefix", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Empty reports whether t trusts nobody.
func (t Trusted) Empty() bool { return len(t.prefixes) == 0 }

// Contains reports whether a is a trusted proxy's address. An IPv4 address
// mapped into IPv6 counts as the IPv4 address.
func (t Trusted) Contains(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap().WithZone("")
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Resolve returns the client's address of a request whose connection came
// from peer and which carries the X-Forwarded-For header values xff (in
// the order they came). When peer is not trusted it is the client, and
// xff is ignored. Otherwise the entries are walked from the right, the
// one the nearest proxy appended: each trusted entry is a proxy that
// passed the request on, and the first entry that is not trusted is the
// client. When an entry does not parse as an address, no proxy vouches
// for anything to its left: the last trusted hop is the client. When every
// entry is trusted, the left-most is.
func (t Trusted) Resolve(peer netip.Addr, xff []string) netip.Addr {
	client := peer.Unmap().WithZone("")
	if !t.Contains(client) {
		return client
	}
	for i := len(xff) - 1; i >= 0; i-- {
		entries := strings.Split(xff[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			e := strings.TrimSpace(entries[j])
			if e == "" && len(entries) == 1 {
				continue // an empty header value adds no hop
			}
			a, ok := parseForwarded(e)
			if !ok {
				return client
			}
			client = a
			if !t.Contains(a) {
				return a
			}
		}
	}
	return client
}

// parseForwarded parses one X-Forwarded-For entry: an address, an IPv6
// address in brackets, either with a port, as proxies write them.
func parseForwarded(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// PeerAddr parses a connection's remote address as net/http gives it
// (Request.RemoteAddr, host:port); the zero Addr when it does not parse.
func PeerAddr(remote string) netip.Addr {
	if ap, err := netip.ParseAddrPort(remote); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if a, err := netip.ParseAddr(remote); err == nil {
		return a.Unmap().WithZone("")
	}
	return netip.Addr{}
}
