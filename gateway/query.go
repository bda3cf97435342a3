package gateway

import (
	"net/url"
	"strings"

	"github.com/sweepgate/sweepgate/gateway/s3err"
)

// queryParam is one parameter of a request's query string, decoded.
type queryParam struct{ name, value string }

// query is a request's query string, in the order it was written.
type query []queryParam

// get returns the value of the parameter name and whether it is present.
func (q query) get(name string) (string, bool) {
	for _, p := range q {
		if p.name == name {
			return p.value, true
		}
	}
	return "", false
}

// parseQuery reads a raw query string the one way that Go's url.ParseQuery
// (the gateway's signature check and handlers) and MinIO's router agree
// on, and refuses the rest: a ";" (the router splits on it, Go refuses
// the pair), a parameter name written with percent-encoding or "+" (the
// router decodes names, and an encoded name is an attempt to be read two
// ways), a value that does not decode (Go drops the pair, the router skips
// it), a value with a control character (the router's patterns do not
// match across a line break), and a name given twice (each reader takes the first, but a signer
// or a proxy on the way may not).
func parseQuery(raw string) (query, error) {
	if raw == "" {
		return nil, nil
	}
	if strings.Contains(raw, ";") {
		return nil, s3err.ErrInvalidArgument.WithMessage("The query string may not contain ';'.")
	}
	var q query
	for _, pair := range strings.Split(raw, "&") {
		if pair == "" {
			continue
		}
		name, rawValue, _ := strings.Cut(pair, "=")
		if !plainParamName(name) {
			return nil, s3err.ErrInvalidArgument.WithMessage("The query parameter name %q is not accepted: names are written plainly, without percent-encoding.", name)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return nil, s3err.ErrInvalidArgument.WithMessage("The value of query parameter %q is not validly percent-encoded.", name)
		}
		if strings.ContainsFunc(value, isControl) {
			// MinIO's router matches a value with ".*", which stops at a
			// line break: it would not see the parameter at all.
			return nil, s3err.ErrInvalidArgument.WithMessage("The value of query parameter %q contains a control character.", name)
		}
		if _, dup := q.get(name); dup {
			return nil, s3err.ErrInvalidArgument.WithMessage("The query parameter %q is given more than once.", name)
		}
		q = append(q, queryParam{name: name, value: value})
	}
	return q, nil
}

// plainParamName reports whether name is a non-empty run of the
// characters S3's parameter names are made of.
func plainParamName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
