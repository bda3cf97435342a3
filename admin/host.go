package admin

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
)

// maxLoggedHost bounds how much of a refused Host header is logged and
// echoed: it is whatever the client sent.
const maxLoggedHost = 255

// hostPolicy says which Host headers the admin listener answers. A web
// page can make a browser send requests to the listener by rebinding the
// page's own DNS name to the listener's address (DNS rebinding); such
// requests still carry the page's name in Host, and a name is accepted
// only when it is the listener's own:
//
//   - the host of admin.listen (a name or an address), with any port;
//   - on a loopback listener, localhost and every loopback address;
//   - on an unspecified listener (0.0.0.0, [::]), every IP address (an
//     address cannot be rebound: a page served from an address is never
//     of the same origin as another one) and the machine's host name;
//   - the names of admin.hosts.
//
// A request without a Host (HTTP/1.0) names nothing and goes through. The
// zero policy accepts no name.
type hostPolicy struct {
	names    map[string]bool // in config.NormalizeHost's form
	loopback bool
	anyIP    bool
}

// newHostPolicy returns the policy of an admin listener configured as
// listen, bound to bound, with the extra names of admin.hosts.
func newHostPolicy(listen string, bound net.Addr, extra []string) hostPolicy {
	p := hostPolicy{names: make(map[string]bool)}
	if h, _, err := net.SplitHostPort(listen); err == nil && h != "" {
		h = config.NormalizeHost(h)
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			p.names[h] = true
		}
	}
	if tcp, ok := bound.(*net.TCPAddr); ok {
		switch ip := tcp.IP; {
		case ip.IsUnspecified():
			p.anyIP, p.loopback = true, true
			if name, err := os.Hostname(); err == nil && name != "" {
				p.names[config.NormalizeHost(name)] = true
			}
		case ip.IsLoopback():
			p.loopback = true
		default:
			p.names[config.NormalizeHost(ip.String())] = true
		}
	}
	for _, h := range extra {
		p.names[config.NormalizeHost(h)] = true
	}
	return p
}

// allows reports whether a request whose Host header is host is addressed
// to the listener.
func (p hostPolicy) allows(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = config.NormalizeHost(host)
	if host == "" {
		return false // a port without a host
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if p.anyIP || p.loopback && ip.IsLoopback() {
			return true
		}
		return p.names[host]
	}
	if p.loopback && host == "localhost" {
		return true
	}
	return p.names[host]
}

// checkHost answers 403, before anything else looks at the request, when
// its Host header is not one of the listener's names (hostPolicy). It
// guards every path of the admin listener, the probes and /metrics too:
// probes and scrapers address the listener by its address, which it
// accepts.
func (a *handler) checkHost(next http.Handler) http.Handler {
	log := a.statusLog()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.hosts.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		host := r.Host
		if len(host) > maxLoggedHost {
			host = host[:maxLoggedHost]
		}
		log.Warn("admin listener: request refused: its Host is not this listener's name or address (admin.hosts lists more names)",
			"host", host, "method", r.Method, "path", r.URL.Path, "client", remoteHost(r))
		writeAPIError(w, http.StatusForbidden, adminapi.CodeHostNotAllowed, fmt.Sprintf(
			"this admin listener answers only requests addressed to its own name or address, and %q is neither; "+
				"if clients reach it by that name, add the name to admin.hosts", host))
	})
}
