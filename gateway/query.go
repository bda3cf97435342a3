package gateway

import (
	"net/url"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

// queryParam is one parameter of a request's query string, decoded.
// control reports that its value holds a control character.
type queryParam struct {
	name, value string
	control     bool
}

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

// listingFilters are the only query parameters whose values may hold a
// control character, each only on the listings named: the parameters
// that choose which keys (or uploads, or versions) a bucket listing
// returns, and nothing else. MinIO's router never reads them: its route
// matchers (cmd/api-router.go, and the STS, admin, KMS and metrics
// routers before it) test only the values of the parameters they name
// (acl, uploads, uploadId, partNumber, list-type, versions, metadata,
// tagging and the other sub-resources, Action and Version for STS), and a
// matcher reads the value of its own name alone, so the route MinIO
// takes, and the operation it executes, does not depend on these values.
// Nor does the gateway's classification: none of them selects a row of
// operationRules. What they change is only which entries the listing
// holds; ceph's s3-tests list with a delimiter, prefix, marker or
// start-after of "\n", and MinIO answers them.
var listingFilters = map[s3op.Operation][]string{
	s3op.ListObjects:          {"prefix", "delimiter", "marker"},
	s3op.ListObjectsV2:        {"prefix", "delimiter", "start-after", "continuation-token"},
	s3op.ListObjectVersions:   {"prefix", "delimiter", "key-marker", "version-id-marker"},
	s3op.ListMultipartUploads: {"prefix", "delimiter", "key-marker", "upload-id-marker"},
}

// isListingFilter reports whether name is a listing filter of some
// listing (listingFilters).
func isListingFilter(name string) bool {
	for _, names := range listingFilters {
		if slices.Contains(names, name) {
			return true
		}
	}
	return false
}

// allowsControl reports whether op takes a control character in the value
// of its parameter name.
func allowsControl(op s3op.Operation, name string) bool {
	return slices.Contains(listingFilters[op], name)
}

// errControl refuses a control character in the value of the query
// parameter name.
func errControl(name string) error {
	return s3err.ErrInvalidArgument.WithMessage("The value of query parameter %q contains a control character; sweepgate accepts one only in the prefix, delimiter and marker parameters of a bucket listing.", name)
}

// parseQuery reads a raw query string the one way that Go's url.ParseQuery
// (the gateway's signature check and handlers) and MinIO's router agree
// on, and refuses the rest: a ";" (the router splits on it, Go refuses
// the pair), a parameter name written with percent-encoding or "+" (the
// router decodes names, and an encoded name is an attempt to be read two
// ways), a value that does not decode (Go drops the pair, the router skips
// it), a name given twice (each reader takes the first, but a signer or a
// proxy on the way may not), and a value with a control character, unless
// control(name) allows it there.
//
// A control character is refused by default because the router's patterns
// (".*") do not match across a line break: a parameter that selects an
// operation (uploadId, partNumber, uploads, tagging, list-type...) with a
// line break in its value is one the router does not see, and MinIO would
// execute another operation than the gateway classified. The parameters
// control may allow are the listing filters (listingFilters), which the
// router never reads; classify then accepts them only on the listings
// they filter.
func parseQuery(raw string, control func(name string) bool) (query, error) {
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
		hasControl := strings.ContainsFunc(value, isControl)
		if hasControl && (control == nil || !control(name)) {
			return nil, errControl(name)
		}
		if _, dup := q.get(name); dup {
			return nil, s3err.ErrInvalidArgument.WithMessage("The query parameter %q is given more than once.", name)
		}
		q = append(q, queryParam{name: name, value: value, control: hasControl})
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
