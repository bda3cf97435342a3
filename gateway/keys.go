package gateway

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sweepgate/sweepgate/s3err"
)

// checkKey refuses an object key that the backend would not store as
// written. MinIO cleans a key that starts with "/" (path.Clean, then the
// slash goes: "//blobs/x" and "/a/../blobs/x" both become "blobs/x") and
// rejects keys with empty, "." or ".." segments; a key that the gateway
// judges as one name while the backend acts on another would slip past
// every rule the gateway keeps for the other name (namespaces, reference
// sources, ownership). So the key the gateway judges is always the key
// the backend stores: none of these forms is accepted, in a path, in a
// DeleteObjects body or in a copy source.
func checkKey(key string) error {
	switch {
	case strings.HasPrefix(key, "/"):
		return errBadKey(key, "it starts with '/'")
	case strings.Contains(key, "//"):
		return errBadKey(key, "it contains '//'")
	case hasDotSegment(key):
		return errBadKey(key, "it has a '.' or '..' segment")
	case !utf8.ValidString(key):
		return errBadKey(key, "it is not valid UTF-8")
	case strings.ContainsRune(key, 0):
		return errBadKey(key, "it contains a NUL byte")
	}
	return nil
}

func errBadKey(key, why string) error {
	return s3err.ErrInvalidArgument.WithMessage("The object key %q is not accepted through sweepgate: %s, and the backend would store it under another name or refuse it.", key, why)
}

// hasDotSegment reports whether a segment of p, split at '/' or '\' and
// trimmed of white space, is "." or "..": the segments MinIO refuses or
// cleans away.
func hasDotSegment(p string) bool {
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		seg = strings.TrimFunc(seg, unicode.IsSpace)
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// checkBucket refuses a bucket name that is a dot segment or carries a
// byte that no bucket name has; the backend checks the rest of the naming
// rules itself.
func checkBucket(bucket string) error {
	if hasDotSegment(bucket) || strings.ContainsAny(bucket, "\\\x00") || !utf8.ValidString(bucket) {
		return s3err.ErrInvalidBucketName.WithMessage("The bucket name %q is not valid.", bucket)
	}
	return nil
}

// copySource is the object an x-amz-copy-source header names.
type copySource struct {
	bucket, key string
	// versionID is the version to copy; "" for the latest.
	versionID string
}

// parseCopySource reads an x-amz-copy-source header, "[/]BUCKET/KEY" with
// an optional "?versionId=ID", percent-encoded, exactly as MinIO reads it
// (url.Parse), and refuses every form that it could read otherwise: a
// scheme, a host ("//bucket/key"), a fragment, a query parameter other
// than one versionId, and a key that checkKey refuses.
func parseCopySource(v string) (copySource, error) {
	bad := func(why string) (copySource, error) {
		return copySource{}, s3err.ErrInvalidArgument.WithMessage("Invalid copy source %q (%s): want /BUCKET/KEY[?versionId=ID].", v, why)
	}
	u, err := url.Parse(v)
	if err != nil {
		return bad("it does not parse")
	}
	if u.Scheme != "" || u.Opaque != "" || u.Host != "" || u.User != nil || u.Fragment != "" || strings.Contains(v, "#") {
		return bad("it is not a path")
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if bucket == "" || key == "" {
		return bad("it names no bucket or no key")
	}
	if err := checkBucket(bucket); err != nil {
		return copySource{}, err
	}
	if err := checkKey(key); err != nil {
		return copySource{}, err
	}
	q, err := parseQuery(u.RawQuery, nil)
	if err != nil {
		return bad("its query does not parse")
	}
	src := copySource{bucket: bucket, key: key}
	for _, p := range q {
		if p.name != "versionId" {
			return bad("only versionId may follow the key")
		}
		src.versionID = strings.TrimSpace(p.value)
	}
	return src, nil
}
