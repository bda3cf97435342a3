// Package sigv4 verifies AWS Signature Version 4 on requests that S3 clients
// send to the gateway, and hands back their bodies in a form that is safe to
// stream on to the backend.
//
// Verification of the request itself (Authorization header or presigned
// query) happens before the body is read. What the body must satisfy (a
// declared SHA-256, a chain of chunk signatures, a trailing checksum) can
// only be known once it has all arrived, so the Payload readers never
// report io.EOF before all of it has been checked, and the forms meant for
// the backend (Payload.Outbound) withhold the final bytes until then: a body
// that fails at its end never reaches the backend complete, so the backend
// never commits it.
package sigv4

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sweepgate/sweepgate/s3err"
)

const (
	// DefaultMaxSkew is how far a request's time may lie from the gateway's
	// clock, as S3 allows.
	DefaultMaxSkew = 15 * time.Minute
	// MaxPresignExpires is the longest validity S3 allows for a presigned
	// URL: seven days, in seconds.
	MaxPresignExpires = 7 * 24 * 60 * 60

	iso8601Basic = "20060102T150405Z"
	scopeDate    = "20060102"
	serviceS3    = "s3"
	sigV4a       = "AWS4-ECDSA-P256-SHA256"
	// maxSignedHeaders bounds the work a hostile SignedHeaders list can
	// cause before the signature is checked; real requests sign a few
	// dozen at most (S3 limits user metadata to 2 KB).
	maxSignedHeaders = 256
)

// Verifier authenticates inbound S3 requests signed with SigV4 against a
// table of credentials. Its exported fields are configuration; set them
// before first use. A Verifier is safe for concurrent use and must not be
// copied after first use (it caches derived signing keys).
type Verifier struct {
	// Credentials resolves access keys to secrets.
	Credentials Credentials
	// Region is the region clients must sign for; "" accepts any region,
	// which suits a gateway whose clients are configured with arbitrary
	// region names.
	Region string
	// Service is the service name in the credential scope; "s3" when empty.
	// The S3-only rules (x-amz-content-sha256 is required, every x-amz-*
	// header must be signed) apply only when it is "s3", so that AWS's
	// generic test vectors (service "service") can be checked too.
	Service string
	// MaxSkew bounds the distance between the request time and Now;
	// DefaultMaxSkew when zero.
	MaxSkew time.Duration
	// Now is the clock; time.Now when nil. Tests inject a fixed clock.
	Now func() time.Time

	keys keyCache
}

// Result is who signed a verified request and how its body is to be read.
type Result struct {
	// AccessKey is the key the request was signed with.
	AccessKey string
	// Principal is the owner recorded for the access key.
	Principal string
	// Backend is the backend identity of the access key (Credential.Backend).
	Backend string
	// Region is the region of the credential scope, which the client
	// believes the bucket is in.
	Region string
	// Presigned is true when the signature came from the query string.
	Presigned bool
	// SignedHeaders are the lower-case header names the signature covers;
	// anything else on the request was not authenticated.
	SignedHeaders []string
	// Payload reads and checks the body.
	Payload *Payload
}

// scope is the parsed credential of a signature: the access key and the
// day/region/service the signing key was derived for.
type scope struct {
	accessKey, date, region, service, terminal string
}

func (s scope) String() string {
	return s.date + "/" + s.region + "/" + s.service + "/" + s.terminal
}

// authHeader is a parsed "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
// Signature=..." Authorization header.
type authHeader struct {
	scope         scope
	signedHeaders []string
	signature     string
}

func (v *Verifier) service() string {
	if v.Service == "" {
		return serviceS3
	}
	return v.Service
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew <= 0 {
		return DefaultMaxSkew
	}
	return v.MaxSkew
}

func (v *Verifier) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// Verify authenticates r, by its Authorization header or its presigned
// query, without reading the body. It returns who signed the request and
// the Payload through which the body must be read. Every error is an
// *s3err.Error.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	if r == nil || r.URL == nil || r.Header == nil {
		return nil, s3err.ErrInvalidRequest
	}
	if v.Credentials == nil {
		return nil, s3err.ErrInternal.WithMessage("The gateway has no credentials configured.")
	}
	auths := r.Header.Values("Authorization")
	rawQuery := r.URL.RawQuery
	presignV4 := queryHasAny(rawQuery, "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Signature")
	presignV2 := queryHasAny(rawQuery, "AWSAccessKeyId")
	switch {
	case len(auths) > 1:
		return nil, s3err.ErrAuthorizationHeaderMalformed.WithMessage("The authorization header is malformed; the request has more than one Authorization header.")
	case len(auths) == 1 && (presignV4 || presignV2):
		return nil, s3err.ErrInvalidArgument.WithMessage("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified.")
	case len(auths) == 1:
		return v.verifyHeader(r, auths[0])
	case presignV4:
		return v.verifyPresigned(r)
	case presignV2:
		return nil, s3err.ErrSignatureVersionNotSupported
	}
	return nil, s3err.ErrAccessDenied.WithMessage("Access Denied: the request is not signed.")
}

// queryHasAny reports whether the raw query names one of keys. It looks at
// the raw text so that the choice of auth mechanism never depends on a
// decoding that might fail.
func queryHasAny(raw string, keys ...string) bool {
	for part := range strings.SplitSeq(raw, "&") {
		k, _, _ := strings.Cut(part, "=")
		for _, key := range keys {
			if k == key {
				return true
			}
		}
	}
	return false
}

// parseAuthorization parses a SigV4 Authorization header value. It checks
// form only; the scope is checked against the verifier's configuration by
// checkScope.
func parseAuthorization(h string) (authHeader, error) {
	var a authHeader
	rest, ok := strings.CutPrefix(h, algorithm)
	if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '\t') {
		return a, headerMalformed("the algorithm must be %s", algorithm)
	}
	var cred, signed, sig string
	var haveCred, haveSigned, haveSig bool
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return a, headerMalformed("%q is not a key=value component", truncate(part))
		}
		switch k {
		case "Credential":
			if haveCred {
				return a, headerMalformed("Credential is given twice")
			}
			cred, haveCred = val, true
		case "SignedHeaders":
			if haveSigned {
				return a, headerMalformed("SignedHeaders is given twice")
			}
			signed, haveSigned = val, true
		case "Signature":
			if haveSig {
				return a, headerMalformed("Signature is given twice")
			}
			sig, haveSig = val, true
		default:
			return a, headerMalformed("unknown component %q", truncate(k))
		}
	}
	if !haveCred || !haveSigned || !haveSig {
		return a, headerMalformed("Credential, SignedHeaders and Signature are all required")
	}
	var err error
	if a.scope, err = parseCredential(cred, false); err != nil {
		return a, err
	}
	if a.signedHeaders, err = parseSignedHeaders(signed, false); err != nil {
		return a, err
	}
	if sig == "" {
		return a, headerMalformed("the Signature is empty")
	}
	a.signature = sig
	return a, nil
}

// parseCredential parses "AKID/20150830/us-east-1/s3/aws4_request". The
// access key is everything before the last four fields, so keys containing
// '/' still parse.
func parseCredential(c string, presigned bool) (scope, error) {
	parts := strings.Split(c, "/")
	if len(parts) < 5 {
		return scope{}, malformed(presigned, "the Credential %q does not have the form access-key/date/region/service/aws4_request", truncate(c))
	}
	n := len(parts)
	s := scope{
		accessKey: strings.Join(parts[:n-4], "/"),
		date:      parts[n-4],
		region:    parts[n-3],
		service:   parts[n-2],
		terminal:  parts[n-1],
	}
	if s.accessKey == "" {
		return scope{}, malformed(presigned, "the Credential has no access key")
	}
	if _, err := time.Parse(scopeDate, s.date); err != nil || len(s.date) != len(scopeDate) {
		return scope{}, malformed(presigned, "invalid credential date %q", truncate(s.date))
	}
	if s.region == "" {
		return scope{}, malformed(presigned, "the Credential has no region")
	}
	return s, nil
}

// parseSignedHeaders splits the SignedHeaders list. The list is kept in the
// client's order: the canonical request uses it as sent.
func parseSignedHeaders(s string, presigned bool) ([]string, error) {
	if s == "" {
		return nil, malformed(presigned, "SignedHeaders is empty")
	}
	names := strings.Split(s, ";")
	if len(names) > maxSignedHeaders {
		return nil, malformed(presigned, "SignedHeaders names more than %d headers", maxSignedHeaders)
	}
	seen := make(map[string]bool, len(names))
	host := false
	for _, n := range names {
		if n == "" || !isToken(n) {
			return nil, malformed(presigned, "SignedHeaders has an invalid name %q", truncate(n))
		}
		l := strings.ToLower(n)
		if seen[l] {
			return nil, malformed(presigned, "SignedHeaders names %q twice", truncate(n))
		}
		seen[l] = true
		host = host || l == "host"
	}
	if !host {
		return nil, malformed(presigned, "SignedHeaders must include host")
	}
	return names, nil
}

// isToken reports whether s is a valid HTTP header name.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// checkScope compares a parsed scope with what the gateway serves, using
// S3's wording for the errors.
func (v *Verifier) checkScope(s scope, presigned bool) error {
	if s.terminal != scopeTerminal {
		return malformed(presigned, "incorrect terminal %q. This endpoint uses %q", truncate(s.terminal), scopeTerminal)
	}
	if s.service != v.service() {
		return malformed(presigned, "incorrect service %q. This endpoint belongs to %q", truncate(s.service), v.service())
	}
	if v.Region != "" && s.region != v.Region {
		return malformed(presigned, "the region '%s' is wrong; expecting '%s'", truncate(s.region), v.Region)
	}
	return nil
}

// requestTime reads the signing time of a header-signed request from
// X-Amz-Date, or from Date when X-Amz-Date is absent.
func requestTime(r *http.Request) (time.Time, error) {
	// Built only when needed: a request that passes pays nothing for it.
	errDate := func() error {
		return s3err.ErrAccessDenied.WithMessage("AWS authentication requires a valid Date or x-amz-date header")
	}
	if v := r.Header.Get("X-Amz-Date"); v != "" {
		t, err := time.Parse(iso8601Basic, v)
		if err != nil {
			return time.Time{}, errDate()
		}
		return t, nil
	}
	if v := r.Header.Get("Date"); v != "" {
		t, err := http.ParseTime(v)
		if err != nil {
			return time.Time{}, errDate()
		}
		return t.UTC(), nil
	}
	return time.Time{}, errDate()
}

func (v *Verifier) verifyHeader(r *http.Request, auth string) (*Result, error) {
	switch {
	case strings.HasPrefix(auth, "AWS "):
		return nil, s3err.ErrSignatureVersionNotSupported
	case strings.HasPrefix(auth, sigV4a):
		return nil, s3err.ErrSignatureVersionNotSupported.WithMessage("Signature Version 4A (%s) is not supported. Please use %s.", sigV4a, algorithm)
	case !strings.HasPrefix(auth, algorithm):
		return nil, s3err.ErrSignatureVersionNotSupported
	}
	a, err := parseAuthorization(auth)
	if err != nil {
		return nil, err
	}
	if err := v.checkScope(a.scope, false); err != nil {
		return nil, err
	}
	t, err := requestTime(r)
	if err != nil {
		return nil, err
	}
	if t.Format(scopeDate) != a.scope.date {
		return nil, headerMalformed("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	cred, ok := v.Credentials.Lookup(a.scope.accessKey)
	if !ok {
		return nil, s3err.ErrInvalidAccessKeyID
	}
	if d := v.now().Sub(t); d > v.maxSkew() || d < -v.maxSkew() {
		return nil, s3err.ErrRequestTimeTooSkewed
	}
	hashes := r.Header.Values("X-Amz-Content-Sha256")
	if len(hashes) > 1 {
		return nil, s3err.ErrInvalidArgument.WithMessage("x-amz-content-sha256 is given more than once.")
	}
	payloadHash := ""
	if len(hashes) == 1 {
		payloadHash = hashes[0]
	}
	if payloadHash == "" {
		if v.service() == serviceS3 {
			return nil, s3err.ErrInvalidRequest.WithMessage("Missing required header for this request: x-amz-content-sha256")
		}
		// Generic SigV4 services sign the hash of the body without sending
		// it; without reading the body first, only an empty one can be
		// assumed, and the hashing reader then proves it empty.
		payloadHash = emptySHA256
	}
	mode, err := parseMode(payloadHash)
	if err != nil {
		return nil, err
	}
	if err := v.checkUnsignedHeaders(r, a.signedHeaders); err != nil {
		return nil, err
	}
	amzDate := t.Format(iso8601Basic)
	scopeStr := a.scope.String()
	key := v.keys.signingKey(cred.SecretKey, a.scope.date, a.scope.region, a.scope.service)
	pairs, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	creq := canonicalRequest(r, pairs, a.signedHeaders, payloadHash, "")
	if !key.matches(stringToSign(amzDate, scopeStr, creq), a.signature) {
		return nil, s3err.ErrSignatureDoesNotMatch
	}
	p, err := newPayload(r, mode, payloadHash, &chainSigner{key: key.key, amzDate: amzDate, scope: scopeStr, prev: a.signature})
	if err != nil {
		return nil, err
	}
	return &Result{
		AccessKey:     cred.AccessKey,
		Principal:     cred.Principal,
		Backend:       cred.Backend,
		Region:        a.scope.region,
		SignedHeaders: lowerAll(a.signedHeaders),
		Payload:       p,
	}, nil
}

func (v *Verifier) verifyPresigned(r *http.Request) (*Result, error) {
	pairs, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, err
	}
	// The parameters every presigned URL must carry, once each.
	presignParams := [...]string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"}
	var vals [len(presignParams)]string
	for i, name := range presignParams {
		vs := queryValues(pairs, name)
		if len(vs) != 1 || vs[0] == "" {
			if len(vs) > 1 {
				return nil, queryMalformed("%s is given more than once", name)
			}
			return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
		}
		vals[i] = vs[0]
	}
	alg, credStr, dateStr, expiresStr, signedStr, sig := vals[0], vals[1], vals[2], vals[3], vals[4], vals[5]
	switch alg {
	case algorithm:
	case sigV4a:
		return nil, s3err.ErrSignatureVersionNotSupported.WithMessage("Signature Version 4A (%s) is not supported. Please use %s.", sigV4a, algorithm)
	default:
		return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("X-Amz-Algorithm only supports \"%s\"", algorithm)
	}
	sc, err := parseCredential(credStr, true)
	if err != nil {
		return nil, err
	}
	if err := v.checkScope(sc, true); err != nil {
		return nil, err
	}
	signed, err := parseSignedHeaders(signedStr, true)
	if err != nil {
		return nil, err
	}
	t, err := time.Parse(iso8601Basic, dateStr)
	if err != nil {
		return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	if t.Format(scopeDate) != sc.date {
		return nil, queryMalformed("Invalid credential date. Date is not the same as X-Amz-Date.")
	}
	expires, err := strconv.ParseInt(expiresStr, 10, 64)
	switch {
	case err != nil:
		return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("X-Amz-Expires should be a number")
	case expires < 1:
		return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("X-Amz-Expires must be non-negative")
	case expires > MaxPresignExpires:
		return nil, s3err.ErrAuthorizationQueryMalformed.WithMessage("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	cred, ok := v.Credentials.Lookup(sc.accessKey)
	if !ok {
		return nil, s3err.ErrInvalidAccessKeyID
	}
	now := v.now()
	if t.Sub(now) > v.maxSkew() {
		return nil, s3err.ErrAccessDenied.WithMessage("Request is not valid yet")
	}
	if now.After(t.Add(time.Duration(expires) * time.Second)) {
		return nil, s3err.ErrExpiredToken
	}
	payloadHash := unsignedPayload
	if vs := queryValues(pairs, "X-Amz-Content-Sha256"); len(vs) > 0 {
		if len(vs) > 1 {
			return nil, queryMalformed("X-Amz-Content-Sha256 is given more than once")
		}
		payloadHash = vs[0]
	}
	mode, err := parseMode(payloadHash)
	if err != nil {
		return nil, err
	}
	if mode != ModeUnsigned && mode != ModeSHA256 {
		return nil, s3err.ErrInvalidRequest.WithMessage("Presigned requests cannot use %s payloads.", mode)
	}
	if err := v.checkUnsignedHeaders(r, signed); err != nil {
		return nil, err
	}
	scopeStr := sc.String()
	key := v.keys.signingKey(cred.SecretKey, sc.date, sc.region, sc.service)
	creq := canonicalRequest(r, pairs, signed, payloadHash, "X-Amz-Signature")
	if !key.matches(stringToSign(dateStr, scopeStr, creq), sig) {
		return nil, s3err.ErrSignatureDoesNotMatch
	}
	p, err := newPayload(r, mode, payloadHash, nil)
	if err != nil {
		return nil, err
	}
	return &Result{
		AccessKey: cred.AccessKey, Principal: cred.Principal, Backend: cred.Backend,
		Region: sc.region, Presigned: true, SignedHeaders: lowerAll(signed), Payload: p,
	}, nil
}

// checkUnsignedHeaders enforces S3's rule that every x-amz-* header on the
// request is signed. Without it, anyone holding a presigned URL could add,
// say, x-amz-copy-source or x-amz-acl and have the gateway forward them
// with its own backend credentials. x-amz-date and x-amz-content-sha256 are
// covered by the string to sign (or replaced by the gateway) either way.
// The rule covers x-minio-* too: MinIO, a backend the gateway fronts, acts
// on its own control headers (x-minio-force-delete turns the DELETE of one
// object into the delete of everything under its name), and the gateway's
// backend credentials may do all of it.
func (v *Verifier) checkUnsignedHeaders(r *http.Request, signed []string) error {
	if v.service() != serviceS3 {
		return nil
	}
	set := make(map[string]bool, len(signed))
	for _, s := range signed {
		set[strings.ToLower(s)] = true
	}
	var unsigned []string
	for k := range r.Header {
		if !hasPrefixFold(k, "x-amz-") && !hasPrefixFold(k, "x-minio-") {
			continue // lower-casing only the names that matter allocates less
		}
		l := lowerHeaderName(k)
		if l == "x-amz-date" || l == "x-amz-content-sha256" || set[l] {
			continue
		}
		unsigned = append(unsigned, l)
	}
	sort.Strings(unsigned)
	if len(unsigned) > 0 {
		return s3err.ErrAccessDenied.WithMessage("There were headers present in the request which were not signed: %s", truncate(strings.Join(unsigned, ", ")))
	}
	return nil
}

// hasPrefixFold reports whether s begins with prefix, a lower-case ASCII
// string, in any case: strings.HasPrefix(strings.ToLower(s), prefix).
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

func lowerAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.ToLower(s)
	}
	return out
}

func headerMalformed(format string, args ...any) error {
	return malformed(false, format, args...)
}

func queryMalformed(format string, args ...any) error {
	return malformed(true, format, args...)
}

// malformed words an error the way S3 does for the header or the query
// form of authentication.
func malformed(presigned bool, format string, args ...any) error {
	if presigned {
		return s3err.ErrAuthorizationQueryMalformed.WithMessage("Error parsing the X-Amz-Credential parameter; "+format, args...)
	}
	return s3err.ErrAuthorizationHeaderMalformed.WithMessage("The authorization header is malformed; "+format, args...)
}

// truncate bounds client-supplied text quoted in error messages.
func truncate(s string) string {
	const max = 64
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}
