package digests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/reply"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/s3err"
)

// copySourceHeaders maps a CopyObject's headers about its source to the
// same headers on a GET of the source: its conditions, and the customer key
// an SSE-C source is read with.
var copySourceHeaders = [][2]string{
	{"X-Amz-Copy-Source-If-Match", "If-Match"},
	{"X-Amz-Copy-Source-If-None-Match", "If-None-Match"},
	{"X-Amz-Copy-Source-If-Modified-Since", "If-Modified-Since"},
	{"X-Amz-Copy-Source-If-Unmodified-Since", "If-Unmodified-Since"},
	{"X-Amz-Copy-Source-Server-Side-Encryption-Customer-Algorithm", "X-Amz-Server-Side-Encryption-Customer-Algorithm"},
	{"X-Amz-Copy-Source-Server-Side-Encryption-Customer-Key", "X-Amz-Server-Side-Encryption-Customer-Key"},
	{"X-Amz-Copy-Source-Server-Side-Encryption-Customer-Key-Md5", "X-Amz-Server-Side-Encryption-Customer-Key-Md5"},
}

// copyBlob serves a CopyObject onto a blob's key in a verifying namespace:
// it is verified before anything is written. The copy source is read from
// the backend (the version the client names, under the client's conditions
// on it) and streamed through a hash; a source that does not hash to the
// digest the destination key names is refused with BadDigest and nothing
// is sent to the backend. A source that does is copied conditional on the
// source still having the ETag of the bytes that were hashed, so the copy
// stores exactly those bytes or nothing: a source replaced after the read
// makes the backend refuse the copy (PreconditionFailed).
//
// In a content namespace, a source within the content limit is kept as it
// is hashed, and what it names is recorded before the copy goes
// (writeCopy).
func (s *Service) copyBlob(ctx context.Context, q *Request, ns *cas.Namespace, digest string) reply.Reply {
	cs := q.CopySource
	var query url.Values
	if cs.VersionID != "" {
		query = url.Values{"versionId": {cs.VersionID}}
	}
	header := http.Header{}
	for _, h := range copySourceHeaders {
		if v := q.Header.Get(h[0]); v != "" {
			header.Set(h[1], v)
		}
	}
	var keep int64
	if ns.Content != "" {
		keep = cas.DefaultContentLimit
	}
	src, err := s.hashObject(ctx, cs.Bucket, cs.Key, query, header, digest, keep)
	var refused *s3client.Answer
	switch {
	case errors.As(err, &refused) && refused.Status == http.StatusNotModified:
		// A GET answers 304 where a copy's if-none-match or
		// if-modified-since condition fails, which S3 answers 412.
		return reply.Error(s3err.ErrPreconditionFailed)
	case errors.As(err, &refused):
		return answer(refused)
	case err != nil:
		return s.backendFailed(ctx, q, err)
	case !src.match:
		return reply.Error(s3err.ErrBadDigest.WithMessage("The copy source does not hash to %s, the digest the destination key names; nothing was copied.", digest))
	}
	out, err := q.Forward.Request()
	if err != nil {
		return reply.Error(err)
	}
	out.Header.Set("X-Amz-Copy-Source-If-Match", `"`+src.etag+`"`)
	if digests, _, err := cas.ParseManifest(src.body); err != nil {
		return reply.Error(errDigests(err))
	} else if len(digests) > 0 {
		return s.writeCopy(ctx, q, out, src.body, digests)
	}
	a, err := s.send(out)
	if err != nil {
		return s.backendFailed(ctx, q, err)
	}
	if _, ok := s3client.ResultETag(a.Body); a.Success() && !ok {
		// A copy is a success only with its CopyObjectResult.
		return reply.Error(errNoResult)
	}
	return answer(a)
}

// hashedObject is what hashObject read of an object.
type hashedObject struct {
	etag, versionID string
	// match reports whether the content hashes to the digest asked for.
	match bool
	// body is the content, when it was asked to be kept and is within
	// that limit.
	body []byte
}

// hashObject reads bucket/key from the backend (the version query names,
// with header's conditions and keys) and streams its body through a hash of
// digest's algorithm. Up to keep bytes are kept (body, when the whole
// content fits); nothing else is buffered, whatever its size. A backend
// refusal is returned as an *s3client.Answer error.
func (s *Service) hashObject(ctx context.Context, bucket, key string, query url.Values, header http.Header, digest string, keep int64) (hashedObject, error) {
	h, ok := cas.NewHash(digest)
	if !ok {
		return hashedObject{}, fmt.Errorf("digest %s: unknown algorithm", digest)
	}
	req, err := s.backend.NewRequest(ctx, http.MethodGet, bucket, key, query)
	if err != nil {
		return hashedObject{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := s.backend.RoundTrip(req)
	if err != nil {
		return hashedObject{}, fmt.Errorf("GET %s/%s: %w", bucket, key, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		a, err := s3client.ReadAnswer(resp)
		if err != nil {
			return hashedObject{}, err
		}
		return hashedObject{}, a
	}
	etag := unquoteETag(resp.Header.Get("ETag"))
	if etag == "" {
		return hashedObject{}, fmt.Errorf("GET %s/%s: the backend's answer has no ETag", bucket, key)
	}
	kept := &limitedBuffer{max: keep}
	if _, err := io.Copy(io.MultiWriter(h, kept), resp.Body); err != nil {
		return hashedObject{}, fmt.Errorf("GET %s/%s: %w", bucket, key, err)
	}
	o := hashedObject{
		etag:      etag,
		versionID: resp.Header.Get("X-Amz-Version-Id"),
		match:     hashDigest(digest, h) == digest,
	}
	if !kept.over {
		o.body = kept.buf.Bytes()
	}
	return o, nil
}

// limitedBuffer keeps what is written to it up to max bytes; past that it
// keeps nothing more and says so (over). It never fails a write.
type limitedBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if !b.over && int64(b.buf.Len()+len(p)) <= b.max {
		b.buf.Write(p)
	} else if !b.over {
		b.over = true
		b.buf = bytes.Buffer{}
	}
	return len(p), nil
}
