package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Signer signs requests with SigV4 header authentication, producing exactly
// the request aws-sdk-go-v2's v4.Signer produces with URI path escaping
// disabled and no session token: the same signed headers (every header but
// Authorization, User-Agent, X-Amzn-Trace-Id, Expect and Transfer-Encoding,
// plus host and a positive content-length), the same canonical query, which
// also becomes the request's query, and the same host with a default port
// left out. The derived signing key is cached per secret, day, region and
// service. A Signer is safe for concurrent use.
type Signer struct {
	AccessKey, SecretKey, Region, Service string

	keys keyCache
}

// signerIgnored are the headers the SDK leaves unsigned.
var signerIgnored = map[string]bool{
	"Authorization": true, "User-Agent": true, "X-Amzn-Trace-Id": true,
	"Expect": true, "Transfer-Encoding": true,
}

// signBuf is a signing's scratch space, recycled across requests.
type signBuf struct {
	buf   []byte
	names []headerName
}

// headerName is a header of the request: its key in the Header map and the
// lower-case name it is signed under.
type headerName struct{ lower, key string }

var signBufs = sync.Pool{New: func() any { return &signBuf{buf: make([]byte, 0, 1024)} }}

// Sign sets r's X-Amz-Date and Authorization headers for payloadHash at time
// t, rewriting r's query into its canonical form and leaving a default port
// out of r.Host, as the SDK does.
func (s *Signer) Sign(r *http.Request, payloadHash string, t time.Time) {
	t = t.UTC()
	var stamp [16]byte
	amzDate := string(t.AppendFormat(stamp[:0], iso8601Basic))
	date := amzDate[:8]
	r.Header["X-Amz-Date"] = append(r.Header["X-Amz-Date"][:0], amzDate)
	host := signerHost(r)
	query := ""
	if r.URL.RawQuery != "" {
		query = encodeSDKQuery(r.URL.Query())
	}

	sb := signBufs.Get().(*signBuf)
	defer signBufs.Put(sb)
	names := signedHeaderNames(r, sb.names[:0])
	sb.names = names
	b := sb.buf[:0]
	b = append(b, r.Method...)
	b = append(b, '\n')
	b = append(b, sdkURIPath(r.URL)...)
	b = append(b, '\n')
	b = append(b, query...)
	b = append(b, '\n')
	for i, h := range names {
		if i > 0 && names[i-1].lower == h.lower {
			continue // its values went with the first key of the name
		}
		b = append(b, h.lower...)
		b = append(b, ':')
		switch h.key {
		case "":
			if h.lower == "host" {
				b = append(b, stripExcessSpaces(host)...)
			} else {
				b = strconv.AppendInt(b, r.ContentLength, 10)
			}
		default:
			for j := i; j < len(names) && names[j].lower == h.lower; j++ {
				if j > i {
					b = append(b, ',')
				}
				b = appendHeaderValues(b, r.Header[names[j].key])
			}
		}
		b = append(b, '\n')
	}
	b = append(b, '\n')
	signedStart := len(b)
	for i, h := range names {
		if i > 0 && names[i-1].lower == h.lower {
			continue
		}
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, h.lower...)
	}
	signedHeaders := string(b[signedStart:])
	b = append(b, '\n')
	b = append(b, payloadHash...)
	sum := sha256.Sum256(b)

	scope := date + "/" + s.Region + "/" + s.Service + "/" + scopeTerminal
	b = b[:0]
	b = append(b, algorithm...)
	b = append(b, '\n')
	b = append(b, amzDate...)
	b = append(b, '\n')
	b = append(b, scope...)
	b = append(b, '\n')
	b = hex.AppendEncode(b, sum[:])
	var mac [sha256.Size]byte
	sig := s.keys.signingKey(s.SecretKey, date, s.Region, s.Service).sum(mac[:0], b)

	b = b[:0]
	b = append(b, algorithm+" Credential="...)
	b = append(b, s.AccessKey...)
	b = append(b, '/')
	b = append(b, scope...)
	b = append(b, ", SignedHeaders="...)
	b = append(b, signedHeaders...)
	b = append(b, ", Signature="...)
	b = hex.AppendEncode(b, sig)
	r.Header["Authorization"] = append(r.Header["Authorization"][:0], string(b))
	sb.buf = b
	if r.URL.RawQuery != "" {
		r.URL.RawQuery = query
	}
}

// signerHost returns the host the request is signed for, setting r.Host to
// it without the port when the port is the scheme's default.
func signerHost(r *http.Request) string {
	host := r.Host
	if host == "" {
		host = r.URL.Host
	}
	colon := strings.IndexByte(host, ':')
	if colon < 0 {
		return host
	}
	if strings.IndexByte(host, ']') >= 0 {
		// An IPv6 literal: the SDK's port parsing, kept as it is.
		port := ""
		if i := strings.Index(host, "]:"); i >= 0 {
			port = host[i+len("]:"):]
		}
		if port == "" || !isDefaultPort(r.URL.Scheme, port) {
			return host
		}
		i := strings.IndexByte(host, ']')
		r.Host = strings.TrimPrefix(host[:i], "[")
		return r.Host
	}
	if port := host[colon+1:]; port == "" || !isDefaultPort(r.URL.Scheme, port) {
		return host
	}
	r.Host = host[:colon]
	return r.Host
}

func isDefaultPort(scheme, port string) bool {
	scheme = strings.ToLower(scheme)
	return scheme == "http" && port == "80" || scheme == "https" && port == "443"
}

// signedHeaderNames appends the headers the SDK signs to names, sorted by
// lower-case name: host and a positive content-length (with no key: their
// values are not read from the Header map), then every header but the
// ignored ones and Content-Length. Keys differing only in case share a
// name; their order is the map's, as in the SDK.
func signedHeaderNames(r *http.Request, names []headerName) []headerName {
	names = append(names, headerName{lower: "host"})
	if r.ContentLength > 0 {
		names = append(names, headerName{lower: "content-length"})
	}
	for k := range r.Header {
		if signerIgnored[k] || strings.EqualFold(k, "content-length") {
			continue
		}
		names = append(names, headerName{lowerHeaderName(k), k})
	}
	slices.SortStableFunc(names, func(a, b headerName) int { return strings.Compare(a.lower, b.lower) })
	return names
}

// lowerNames holds the lower-case form of the header names a proxied S3
// request usually carries, so that signing them allocates nothing.
var lowerNames = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"Accept", "Accept-Encoding", "Amz-Sdk-Invocation-Id", "Amz-Sdk-Request", "Cache-Control",
		"Content-Disposition", "Content-Encoding", "Content-Language", "Content-Md5", "Content-Type",
		"Expires", "If-Match", "If-Modified-Since", "If-None-Match", "If-Unmodified-Since", "Range",
		"X-Amz-Acl", "X-Amz-Checksum-Crc32", "X-Amz-Checksum-Crc32c", "X-Amz-Checksum-Crc64nvme",
		"X-Amz-Checksum-Sha1", "X-Amz-Checksum-Sha256", "X-Amz-Checksum-Mode", "X-Amz-Content-Sha256",
		"X-Amz-Copy-Source", "X-Amz-Date", "X-Amz-Decoded-Content-Length", "X-Amz-Meta-Sweepgate",
		"X-Amz-Sdk-Checksum-Algorithm", "X-Amz-Storage-Class", "X-Amz-Tagging", "X-Amz-Trailer",
		"X-Amz-User-Agent", "X-Sweepgate-Request-Id",
	} {
		m[n] = strings.ToLower(n)
	}
	return m
}()

// lowerHeaderName is strings.ToLower, without allocating for names already
// in lower case or in lowerNames.
func lowerHeaderName(s string) string {
	if l, ok := lowerNames[s]; ok {
		return l
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' || c >= 0x80 {
			return strings.ToLower(s)
		}
	}
	return s
}

// appendHeaderValues appends values trimmed and joined with ',' as the SDK
// does.
func appendHeaderValues(b []byte, values []string) []byte {
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, strings.TrimSpace(stripExcessSpaces(v))...)
	}
	return b
}

// stripExcessSpaces trims leading and trailing spaces and folds inner runs
// of spaces to one (spaces only, as the SDK does).
func stripExcessSpaces(s string) string {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "  ") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' && i > 0 && s[i-1] == ' ' {
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

// sdkURIPath is the path as the SDK signs it with path escaping disabled:
// the escaped path (or an opaque URL's path part), "/" when empty.
func sdkURIPath(u *url.URL) string {
	var p string
	if u.Opaque != "" {
		opaque := u.Opaque
		if i := strings.Index(opaque, "?"); i >= 0 {
			opaque = opaque[:i]
		}
		opaque = strings.TrimPrefix(opaque, "//")
		if i := strings.Index(opaque, "/"); i >= 0 {
			p = opaque[i:]
		}
	} else {
		p = u.EscapedPath()
	}
	if p == "" {
		return "/"
	}
	return p
}

// encodeSDKQuery is the SDK's canonical query: every pair escaped with
// url.QueryEscape ('+' as %20), sorted by key, then value.
func encodeSDKQuery(q url.Values) string {
	type pair struct{ k, v string }
	pairs := make([]pair, 0, len(q))
	for k, vs := range q {
		ek := sdkQueryEscape(k)
		for _, v := range vs {
			pairs = append(pairs, pair{ek, sdkQueryEscape(v)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

func sdkQueryEscape(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "+", "%20")
}
