package gateway

import (
	"net"
	"net/http"
	"strings"
)

// Route is where an S3 request is addressed: its bucket, its key and the
// operation it names.
type Route struct {
	Bucket    string
	Key       string
	Operation Operation
}

// resolveRoute reads the bucket and key from a path-style request
// (/bucket/key) or a virtual-hosted-style one (Host: bucket.domain, path /key)
// when the host is a subdomain of one of the configured domains, and names
// its operation. A request the gateway cannot read exactly as the backend
// will (see classify and checkKey) gets OpUnsupported and an error that
// refuses it.
func resolveRoute(r *http.Request, domains []string) (Route, error) {
	path := r.URL.Path
	var bucket, key string
	if b, ok := virtualHostBucket(r.Host, domains); ok {
		bucket, key = b, strings.TrimPrefix(path, "/")
	} else {
		rest := strings.TrimPrefix(path, "/")
		bucket, key, _ = strings.Cut(rest, "/")
	}
	rt := Route{Bucket: bucket, Key: key, Operation: OpUnsupported}
	t := targetObject
	switch {
	case bucket == "" && key != "":
		return rt, errBadKey(key, "the path names no bucket")
	case bucket == "":
		t = targetService
	case key == "":
		t = targetBucket
	}
	if bucket != "" {
		if err := checkBucket(bucket); err != nil {
			return rt, err
		}
	}
	if key != "" {
		if err := checkKey(key); err != nil {
			return rt, err
		}
	}
	op, err := classify(r, t)
	if err != nil {
		return rt, err
	}
	if op == OpCopyObject || op == OpUploadPartCopy {
		if _, err := parseCopySource(r.Header.Get("X-Amz-Copy-Source")); err != nil {
			return rt, err
		}
	}
	rt.Operation = op
	return rt, nil
}

// virtualHostBucket returns the bucket named by a Host header of the form
// bucket.domain[:port] for a configured domain.
func virtualHostBucket(host string, domains []string) (string, bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, d := range domains {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if b, ok := strings.CutSuffix(host, "."+d); ok && b != "" {
			return b, true
		}
	}
	return "", false
}

// backendPath is the path-style path of a route on the backend, as
// (decoded, escaped). The escaped form encodes every byte but the unreserved
// characters and '/', which is how S3 and its signature expect a path.
func backendPath(rt Route) (string, string) {
	if rt.Bucket == "" {
		return "/", "/"
	}
	p := "/" + rt.Bucket
	if rt.Key != "" {
		p += "/" + rt.Key
	}
	return p, escapePath(p)
}

// escapePath percent-encodes s as an S3 object path: every byte except
// A-Z a-z 0-9 - . _ ~ and / becomes %XX.
func escapePath(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s) + len(s)/4)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '/' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}
