package s3client

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Object is one object of a listing.
type Object struct {
	Key      string
	Size     int64
	ETag     string
	Modified time.Time
}

// ObjectPage is one page of a listing.
type ObjectPage struct {
	Objects []Object
	// Next is the key to start the following page after; Done says there
	// is none.
	Next string
	Done bool
	// Token is the backend's continuation token for the following page
	// ("" when it gave none); see ListObjectsNext.
	Token string
}

// ListObjects returns one page of at most max objects of bucket under
// prefix whose keys sort after startAfter ("" for the beginning). Resuming
// from a key rather than a continuation token lets a caller resume from a
// recorded position with any backend. A truncated page that does not move
// forward is an error.
func (c *Client) ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (ObjectPage, error) {
	return c.listObjects(ctx, bucket, prefix, startAfter, "", max)
}

// ListObjectsNext returns the page of a listing that follows prev (of the
// same bucket and prefix; only its Next and Token are used): the same
// objects as ListObjects after prev.Next, at most max of them. With
// prev's continuation token, the backend goes on with the listing it has
// begun rather than starting another (MinIO walks a prefix anew for every
// listing it starts, so paging a large prefix by key alone costs it work
// in proportion to the prefix every page). An object the backend answers
// that does not sort after prev.Next is left out, so a token never lists
// anything twice.
func (c *Client) ListObjectsNext(ctx context.Context, bucket, prefix string, prev ObjectPage, max int) (ObjectPage, error) {
	return c.listObjects(ctx, bucket, prefix, prev.Next, prev.Token, max)
}

// listObjects lists one page after startAfter, continuing the listing of
// token when it is set.
func (c *Client) listObjects(ctx context.Context, bucket, prefix, startAfter, token string, max int) (ObjectPage, error) {
	q := url.Values{"list-type": {"2"}, "encoding-type": {"url"}, "max-keys": {strconv.Itoa(max)}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if token != "" {
		q.Set("continuation-token", token)
	} else if startAfter != "" {
		q.Set("start-after", startAfter)
	}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q, nil)
	if err != nil {
		return ObjectPage{}, fmt.Errorf("list objects of %s/%s: %w", bucket, prefix, err)
	}
	var res listObjectsResult
	if err := xml.Unmarshal(body, &res); err != nil {
		return ObjectPage{}, fmt.Errorf("list objects of %s/%s: %w", bucket, prefix, err)
	}
	decode := keyDecoder(res.EncodingType)
	page := ObjectPage{Done: !res.IsTruncated}
	if res.IsTruncated {
		page.Token = res.NextContinuationToken
	}
	for _, o := range res.Contents {
		key, err := decode(o.Key)
		if err != nil {
			return ObjectPage{}, fmt.Errorf("list objects of %s: key %q: %w", bucket, o.Key, err)
		}
		if key <= startAfter {
			continue
		}
		mod, _ := time.Parse(time.RFC3339Nano, o.LastModified)
		page.Objects = append(page.Objects, Object{Key: key, Size: o.Size, ETag: UnquoteETag(o.ETag), Modified: mod})
	}
	if n := len(page.Objects); n > 0 {
		page.Next = page.Objects[n-1].Key
	}
	if res.IsTruncated && (page.Next == "" || page.Next <= startAfter) {
		return ObjectPage{}, fmt.Errorf("list objects of %s/%s: truncated page that does not move forward", bucket, prefix)
	}
	return page, nil
}

// ObjectInfo is what a HEAD says about an object.
type ObjectInfo struct {
	Size int64
	ETag string
}

// notFound makes a refusal of an object read that answered 404 match
// ErrNoSuchKey too: the object is not there, whether or not its bucket is.
func notFound(status int, err error) error {
	if status == http.StatusNotFound {
		return fmt.Errorf("%w: %w", ErrNoSuchKey, err)
	}
	return err
}

// Head returns an object's size and ETag. A missing object (a 404) is an
// error that matches ErrNoSuchKey; any other failure is an error too:
// existence unknown.
func (c *Client) Head(ctx context.Context, bucket, key string) (ObjectInfo, error) {
	resp, done, err := c.send(ctx, http.MethodHead, bucket, key, nil, nil)
	if err != nil {
		return ObjectInfo{}, err
	}
	defer done()
	if resp.StatusCode/100 != 2 {
		return ObjectInfo{}, notFound(resp.StatusCode, refusal(resp))
	}
	return ObjectInfo{Size: resp.ContentLength, ETag: UnquoteETag(resp.Header.Get("ETag"))}, nil
}

// GetOptions selects what Get reads.
type GetOptions struct {
	// VersionID, when not empty, names the version to read.
	VersionID string
	// IfMatch, when not empty, reads the object only while its ETag is
	// this one (a 412 *Error otherwise).
	IfMatch string
}

// Get reads an object whole, at most limit bytes (ErrTooLarge past it),
// and returns it with its ETag. A refusal is an *Error carrying the
// answer; a 404 matches ErrNoSuchKey too.
func (c *Client) Get(ctx context.Context, bucket, key string, opt GetOptions, limit int64) ([]byte, string, error) {
	var q url.Values
	if opt.VersionID != "" {
		q = url.Values{"versionId": {opt.VersionID}}
	}
	resp, done, err := c.send(ctx, http.MethodGet, bucket, key, q, func(req *http.Request) {
		if opt.IfMatch != "" {
			req.Header.Set("If-Match", `"`+opt.IfMatch+`"`)
		}
	})
	if err != nil {
		return nil, "", err
	}
	defer done()
	switch {
	case resp.StatusCode/100 != 2:
		return nil, "", notFound(resp.StatusCode, refusal(resp))
	case resp.ContentLength > limit:
		return nil, "", fmt.Errorf("%w: %d bytes, at most %d read", ErrTooLarge, resp.ContentLength, limit)
	}
	body, err := ReadBody(resp.Body, limit)
	if err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", bucket, key, err)
	}
	return body, UnquoteETag(resp.Header.Get("ETag")), nil
}

// DeleteObjects deletes up to 1000 keys of bucket in one request, sent
// once. It returns the keys the backend reported failing, with their error
// codes; every other key is gone (deleted now, or already absent). An
// error means the outcome is unknown for every key: list again.
func (c *Client) DeleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > 1000 {
		return nil, fmt.Errorf("s3client: %d keys in one delete, at most 1000", len(keys))
	}
	dr := deleteRequest{Quiet: true, Objects: make([]deleteKey, len(keys))}
	for i, k := range keys {
		dr.Objects[i].Key = k
	}
	doc, err := xml.Marshal(dr)
	if err != nil {
		return nil, err
	}
	sum := md5.Sum(doc)
	out, err := c.call(ctx, http.MethodPost, bucket, "", url.Values{"delete": {""}}, func(req *http.Request) {
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
		req.Header.Set("Content-Type", "application/xml")
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		req.Body = io.NopCloser(bytes.NewReader(doc))
		req.ContentLength = int64(len(doc))
	})
	if err != nil {
		return nil, fmt.Errorf("delete objects of %s: %w", bucket, err)
	}
	var res deleteResult
	if err := xml.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("decode delete answer: %w", err)
	}
	failed := make(map[string]string, len(res.Errors))
	for _, e := range res.Errors {
		if e.Code == "NoSuchKey" {
			continue // already gone
		}
		failed[e.Key] = e.Code
	}
	return failed, nil
}
