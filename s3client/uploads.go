package s3client

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"
)

// ListBuckets returns every bucket's name in sorted order, which a resume
// position kept by bucket relies on.
func (c *Client) ListBuckets(ctx context.Context) ([]string, error) {
	var names []string
	q := url.Values{}
	for {
		body, err := c.call(ctx, http.MethodGet, "", "", q, nil)
		if err != nil {
			return nil, fmt.Errorf("list buckets: %w", err)
		}
		var res listBucketsResult
		if err := xml.Unmarshal(body, &res); err != nil {
			return nil, fmt.Errorf("list buckets: %w", err)
		}
		for _, b := range res.Buckets {
			names = append(names, b.Name)
		}
		if res.ContinuationToken == "" {
			break
		}
		q = url.Values{"continuation-token": {res.ContinuationToken}}
	}
	sort.Strings(names)
	return names, nil
}

// Upload is one multipart upload of a listing.
type Upload struct {
	Key       string
	UploadID  string
	Initiated time.Time
}

// UploadPage is one page of a bucket's multipart uploads.
type UploadPage struct {
	Uploads []Upload
	// NextKey and NextUploadID are where the following page starts; Done
	// says there is none.
	NextKey, NextUploadID string
	Done                  bool
}

// ListUploads returns one page of at most max uploads of bucket, starting
// after the markers ("" for the beginning). Keys are asked for
// URL-encoded, so that any byte a key may hold survives the XML. A
// truncated page that names no new position is an error.
func (c *Client) ListUploads(ctx context.Context, bucket, keyMarker, uploadIDMarker string, max int) (UploadPage, error) {
	q := url.Values{"uploads": {""}, "encoding-type": {"url"}, "max-uploads": {strconv.Itoa(max)}}
	if keyMarker != "" {
		q.Set("key-marker", keyMarker)
		if uploadIDMarker != "" {
			q.Set("upload-id-marker", uploadIDMarker)
		}
	}
	res, err := c.listUploads(ctx, bucket, q)
	if err != nil {
		return UploadPage{}, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	decode := keyDecoder(res.EncodingType)
	page := UploadPage{Done: !res.IsTruncated}
	for _, u := range res.Uploads {
		key, err := decode(u.Key)
		if err != nil {
			return UploadPage{}, fmt.Errorf("list multipart uploads of %s: key %q: %w", bucket, u.Key, err)
		}
		init, _ := time.Parse(time.RFC3339Nano, u.Initiated)
		page.Uploads = append(page.Uploads, Upload{Key: key, UploadID: u.UploadID, Initiated: init})
	}
	if res.IsTruncated {
		if page.NextKey, err = decode(res.NextKeyMarker); err != nil {
			return UploadPage{}, fmt.Errorf("list multipart uploads of %s: next marker: %w", bucket, err)
		}
		page.NextUploadID = res.NextUploadIDMarker
		if page.NextKey == "" && len(page.Uploads) > 0 {
			last := page.Uploads[len(page.Uploads)-1]
			page.NextKey, page.NextUploadID = last.Key, last.UploadID
		}
		if page.NextKey == "" || (page.NextKey == keyMarker && page.NextUploadID == uploadIDMarker) {
			return UploadPage{}, fmt.Errorf("list multipart uploads of %s: truncated page without a new marker", bucket)
		}
	}
	return page, nil
}

// UploadInFlight reports whether the backend has a multipart upload of
// exactly bucket/key; a missing bucket has none. The key's own uploads
// sort before those of longer keys it prefixes, so the first entry
// answers.
func (c *Client) UploadInFlight(ctx context.Context, bucket, key string) (bool, error) {
	q := url.Values{"uploads": {""}, "encoding-type": {"url"}, "prefix": {key}, "max-uploads": {"1"}}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q, nil)
	if errors.Is(err, ErrNoSuchBucket) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var res listUploadsResult
	if err := xml.Unmarshal(body, &res); err != nil {
		return false, err
	}
	decode := keyDecoder(res.EncodingType)
	for _, u := range res.Uploads {
		k, err := decode(u.Key)
		if err != nil {
			return false, err
		}
		if k == key {
			return true, nil
		}
	}
	return false, nil
}

// CountParts counts the parts of an upload and their bytes, reading the
// whole (paginated) part list. A missing upload or bucket is an error that
// matches ErrNoSuchUpload or ErrNoSuchBucket.
func (c *Client) CountParts(ctx context.Context, bucket, key, uploadID string) (parts int, size int64, err error) {
	marker := ""
	for {
		q := url.Values{"uploadId": {uploadID}, "max-parts": {"1000"}}
		if marker != "" {
			q.Set("part-number-marker", marker)
		}
		body, err := c.call(ctx, http.MethodGet, bucket, key, q, nil)
		if err != nil {
			return 0, 0, err
		}
		var res listPartsResult
		if err := xml.Unmarshal(body, &res); err != nil {
			return 0, 0, fmt.Errorf("list parts: %w", err)
		}
		for _, p := range res.Parts {
			parts++
			size += p.Size
		}
		if !res.IsTruncated {
			return parts, size, nil
		}
		if res.NextPartNumberMarker == "" || res.NextPartNumberMarker == marker {
			return 0, 0, errors.New("list parts: truncated page without a new marker")
		}
		marker = res.NextPartNumberMarker
	}
}

// UploadExists asks whether the backend still has an upload, by listing
// one part. A missing upload or bucket is false; any other failure is an
// error: existence unknown.
func (c *Client) UploadExists(ctx context.Context, bucket, key, uploadID string) (bool, error) {
	_, err := c.call(ctx, http.MethodGet, bucket, key, url.Values{"uploadId": {uploadID}, "max-parts": {"1"}}, nil)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNoSuchUpload), errors.Is(err, ErrNoSuchBucket):
		return false, nil
	}
	return false, err
}

// Abort aborts an upload, sending the request once. nil means it is gone:
// aborted now (a success status with no body, as S3 answers an abort), or
// NoSuchUpload or NoSuchBucket because it already was. Any other result,
// a success status with a body among them, is unclear: the abort may or
// may not have happened.
func (c *Client) Abort(ctx context.Context, bucket, key, uploadID string) error {
	body, err := c.call(ctx, http.MethodDelete, bucket, key, url.Values{"uploadId": {uploadID}}, nil)
	switch {
	case errors.Is(err, ErrNoSuchUpload) || errors.Is(err, ErrNoSuchBucket):
		return nil
	case err != nil:
		return err
	case !EmptyBody(body):
		return fmt.Errorf("abort answered success with an unexpected body (%d bytes)", len(body))
	}
	return nil
}

// Part is one part of an upload as the backend lists it.
type Part struct {
	Number       int
	ETag         string
	Size         int64
	LastModified time.Time
}

// maxPartPages bounds the pages ListParts reads: S3 holds at most 10000
// parts and lists up to 1000 a page.
const maxPartPages = 11

// ListParts returns every part of an upload with its time on the backend's
// clock, reading all pages (at most maxPartPages). A part whose time cannot
// be read is an error: a caller that judges activity must not guess it. A
// missing upload or bucket is an error that matches ErrNoSuchUpload or
// ErrNoSuchBucket.
func (c *Client) ListParts(ctx context.Context, bucket, key, uploadID string) ([]Part, error) {
	var parts []Part
	marker := ""
	for range maxPartPages {
		q := url.Values{"uploadId": {uploadID}, "max-parts": {"1000"}}
		if marker != "" {
			q.Set("part-number-marker", marker)
		}
		body, err := c.call(ctx, http.MethodGet, bucket, key, q, nil)
		if err != nil {
			return nil, fmt.Errorf("list parts: %w", err)
		}
		var res listPartsResult
		if err := xml.Unmarshal(body, &res); err != nil {
			return nil, fmt.Errorf("list parts: %w", err)
		}
		for _, p := range res.Parts {
			at, err := time.Parse(time.RFC3339Nano, p.LastModified)
			if err != nil {
				return nil, fmt.Errorf("list parts: part %d: last modified %q: %w", p.PartNumber, p.LastModified, err)
			}
			parts = append(parts, Part{Number: p.PartNumber, ETag: p.ETag, Size: p.Size, LastModified: at})
		}
		if !res.IsTruncated {
			return parts, nil
		}
		if res.NextPartNumberMarker == "" || res.NextPartNumberMarker == marker {
			return nil, errors.New("list parts: truncated page without a new marker")
		}
		marker = res.NextPartNumberMarker
	}
	return nil, fmt.Errorf("list parts: more than %d pages", maxPartPages)
}

// NewestPart returns the latest LastModified among parts, zero when there
// are none.
func NewestPart(parts []Part) time.Time {
	var newest time.Time
	for _, p := range parts {
		if p.LastModified.After(newest) {
			newest = p.LastModified
		}
	}
	return newest
}

// MaxUploadListing bounds one ListMultipartUploads answer. It is far above
// MaxAnswer because a backend may ignore max-uploads: MinIO answers with
// every upload of the bucket at once, about 400 bytes of XML each, so this
// admits about 2.5 million. The answer is decoded as it arrives, so what is
// held is the decoded uploads, not the XML.
const MaxUploadListing = 1 << 30

// listUploads sends a ListMultipartUploads request and decodes its answer
// as it streams in, within MaxUploadListing: with decodeUploadListing, or,
// for an answer outside the plain XML that reads, by asking again and
// decoding that answer with encoding/xml (a listing is a read: the second
// answer is as good as the first).
func (c *Client) listUploads(ctx context.Context, bucket string, q url.Values) (*listUploadsResult, error) {
	var res *listUploadsResult
	err := c.readListing(ctx, bucket, q, func(body *countingReader) error {
		var ok bool
		var err error
		if res, ok, err = decodeUploadListing(body); err == nil && !ok {
			err = errNotPlain
		}
		return err
	})
	if !errors.Is(err, errNotPlain) {
		return res, err
	}
	err = c.readListing(ctx, bucket, q, func(body *countingReader) error {
		var doc struct {
			XMLName xml.Name `xml:"ListMultipartUploadsResult"`
			listUploadsResult
		}
		err := xml.NewDecoder(body).Decode(&doc)
		res = &doc.listUploadsResult
		return err
	})
	return res, err
}

// readListing sends a ListMultipartUploads request and hands its answer's
// body, within MaxUploadListing, to decode. A failure is decode's, except
// for an answer larger than MaxUploadListing (ErrTooLarge) and errNotPlain,
// which it passes on as they are.
func (c *Client) readListing(ctx context.Context, bucket string, q url.Values, decode func(*countingReader) error) error {
	resp, done, err := c.send(ctx, http.MethodGet, bucket, "", q, nil)
	if err != nil {
		return err
	}
	defer done()
	if resp.StatusCode/100 != 2 {
		return refusal(resp)
	}
	body := &countingReader{r: io.LimitReader(resp.Body, MaxUploadListing+1)}
	err = decode(body)
	switch {
	case err == nil:
		return nil
	case body.n > MaxUploadListing:
		return fmt.Errorf("the answer is larger than %d bytes: %w", int64(MaxUploadListing), ErrTooLarge)
	case errors.Is(err, errNotPlain):
		return err
	}
	return fmt.Errorf("read backend answer: %w", err)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
