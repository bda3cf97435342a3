package sigv4

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
)

// queryPair is one decoded query parameter, in the order it was sent.
type queryPair struct{ key, value string }

// parseQuery splits a raw query string into decoded pairs. It keeps every
// pair, duplicates included, because the signature covers all of them, and
// it refuses a malformed escape instead of guessing what the client meant:
// the backend must see exactly what was verified. '+' decodes to a space, as
// it does for the backend and for MinIO's own verifier.
func parseQuery(raw string) ([]queryPair, error) {
	if raw == "" {
		return nil, nil
	}
	var pairs []queryPair
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		dk, err := url.QueryUnescape(k)
		if err != nil {
			return nil, s3err.ErrInvalidArgument.WithMessage("The query string has an invalid escape in %q.", k)
		}
		dv, err := url.QueryUnescape(v)
		if err != nil {
			return nil, s3err.ErrInvalidArgument.WithMessage("The query string has an invalid escape in the value of %q.", k)
		}
		pairs = append(pairs, queryPair{dk, dv})
	}
	return pairs, nil
}

// queryValues returns every value of key (case-sensitive, as S3 treats
// query parameter names).
func queryValues(pairs []queryPair, key string) []string {
	var vs []string
	for _, p := range pairs {
		if p.key == key {
			vs = append(vs, p.value)
		}
	}
	return vs
}

// isUnreserved reports whether c is left as is by SigV4's URI encoding.
func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// uriEncode percent-encodes every byte of s except the unreserved characters
// (and '/' when keepSlash), with upper-case hex digits, as SigV4 requires.
func uriEncode(s string, keepSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	n := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isUnreserved(c) && !(keepSlash && c == '/') {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || keepSlash && c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// canonicalURI is S3's form of the path: decoded once (net/http has done
// that in URL.Path) and encoded again byte by byte. Unlike other AWS
// services, S3 neither normalises "." and ".." segments nor collapses
// slashes, because they are legal in object keys.
func canonicalURI(u *url.URL) string {
	p := u.Path
	if p == "" {
		return "/"
	}
	return uriEncode(p, true)
}

// canonicalQuery encodes each pair, leaving out skip (the signature itself
// in presigned URLs), and sorts by encoded key, then encoded value.
func canonicalQuery(pairs []queryPair, skip string) string {
	enc := make([]queryPair, 0, len(pairs))
	for _, p := range pairs {
		if skip != "" && p.key == skip {
			continue
		}
		enc = append(enc, queryPair{uriEncode(p.key, false), uriEncode(p.value, false)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].key != enc[j].key {
			return enc[i].key < enc[j].key
		}
		return enc[i].value < enc[j].value
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// headerValues returns the values of a signed header as the client saw them
// when it signed. net/http moves some headers out of Header, so those are
// read back from where it put them.
func headerValues(r *http.Request, name string) []string {
	switch name {
	case "host":
		if r.Host != "" {
			return []string{r.Host}
		}
		return []string{r.URL.Host}
	case "content-length":
		if vs := r.Header.Values("Content-Length"); len(vs) > 0 {
			return vs
		}
		if r.ContentLength >= 0 {
			return []string{strconv.FormatInt(r.ContentLength, 10)}
		}
		return nil
	case "transfer-encoding":
		if vs := r.Header.Values("Transfer-Encoding"); len(vs) > 0 {
			return vs
		}
		return r.TransferEncoding
	}
	if vs := r.Header.Values(name); len(vs) > 0 {
		return vs
	}
	// Header maps built by hand may hold keys that are not in canonical
	// form; a server-parsed request never gets here with a value.
	var vs []string
	for k, v := range r.Header {
		if strings.EqualFold(k, name) {
			vs = append(vs, v...)
		}
	}
	if len(vs) == 0 && name == "expect" {
		// Some proxies drop Expect after answering 100-continue themselves.
		return []string{"100-continue"}
	}
	return vs
}

// trimHeaderValue trims a value and folds inner runs of spaces to one, as
// the SigV4 canonical form requires.
func trimHeaderValue(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	b.Grow(len(v))
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// writeCanonicalHeaders writes "name:value\n" for each signed header, in
// the order the client listed them; multiple values are joined with ','.
func writeCanonicalHeaders(b *strings.Builder, r *http.Request, signed []string) {
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range headerValues(r, strings.ToLower(name)) {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimHeaderValue(v))
		}
		b.WriteByte('\n')
	}
}

// canonicalRequest builds the SigV4 canonical request for r. skipQuery names
// the query parameter left out (X-Amz-Signature for presigned URLs). It is
// written into one builder sized for a typical request.
func canonicalRequest(r *http.Request, pairs []queryPair, signed []string, payloadHash, skipQuery string) string {
	var b strings.Builder
	b.Grow(512 + len(r.URL.Path) + len(r.URL.RawQuery))
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(r.URL))
	b.WriteByte('\n')
	if len(pairs) > 0 {
		b.WriteString(canonicalQuery(pairs, skipQuery))
	}
	b.WriteByte('\n')
	writeCanonicalHeaders(&b, r, signed)
	b.WriteByte('\n')
	for i, name := range signed {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(name)
	}
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}
