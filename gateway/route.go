package gateway

import (
	"net"
	"net/http"
	"strings"

	"github.com/sweepgate/sweepgate/s3op"
)

// Route is where an S3 request is addressed: its bucket, its key and the
// operation it names.
type Route struct {
	Bucket    string
	Key       string
	Operation s3op.Operation
}

// resolveRoute reads the bucket and key from a path-style request
// (/bucket/key) or a virtual-hosted-style one (Host: bucket.domain, path /key)
// when the host is a subdomain of one of the configured domains, and names
// its operation. A request the gateway cannot read exactly as the backend
// will (see classify and checkKey) gets s3op.Unsupported and an error that
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
	rt := Route{Bucket: bucket, Key: key, Operation: s3op.Unsupported}
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
	if op == s3op.CopyObject || op == s3op.UploadPartCopy {
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
