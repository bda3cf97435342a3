package reclaim

import (
	"bytes"
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

	"github.com/sweepgate/sweepgate/multipart"
)

// maxBackendBody bounds the XML answers read whole; a page of 1000 uploads
// or parts with 1 KiB keys fits.
const maxBackendBody = 16 << 20

// errNoSuchUpload says the backend does not have the upload (any more).
var errNoSuchUpload = errors.New("reclaim: backend has no such upload")

// errNoSuchBucket says the backend does not have the bucket (any more).
var errNoSuchBucket = errors.New("reclaim: backend has no such bucket")

// s3 makes the few S3 calls the reclaimer needs, each bounded by a timeout
// so that a hung backend stops a pass instead of holding it forever.
type s3 struct {
	b       multipart.Backend
	timeout time.Duration
}

// s3Error is an S3 error document.
type s3Error struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// statusError is a backend answer that was not the expected success.
type statusError struct {
	Status int
	Code   string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("backend answered %d %s", e.Status, e.Code)
}

// call sends one request and returns the body of a 2xx answer. A 404 with
// NoSuchUpload or NoSuchBucket maps to errNoSuchUpload or errNoSuchBucket;
// any other answer is a *statusError, and no answer is the transport error.
func (c s3) call(ctx context.Context, method, bucket, key string, q url.Values) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.b.NewRequest(ctx, method, bucket, key, q)
	if err != nil {
		return nil, err
	}
	resp, err := c.b.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from the backend: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBackendBody+1))
	if err != nil {
		return nil, fmt.Errorf("read backend answer: %w", err)
	}
	if len(body) > maxBackendBody {
		return nil, errors.New("backend answer too large")
	}
	code := ""
	if bytes.Contains(body[:min(len(body), 256)], []byte("<Error")) {
		var e s3Error
		if xml.Unmarshal(body, &e) == nil {
			code = e.Code
		}
	}
	switch {
	case code == "NoSuchUpload":
		return nil, errNoSuchUpload
	case code == "NoSuchBucket":
		return nil, errNoSuchBucket
	case resp.StatusCode/100 == 2 && code == "":
		return body, nil
	}
	return nil, &statusError{Status: resp.StatusCode, Code: code}
}

type listBucketsResult struct {
	Buckets []struct {
		Name string `xml:"Name"`
	} `xml:"Buckets>Bucket"`
	ContinuationToken string `xml:"ContinuationToken"`
}

// listBuckets returns every bucket's name in sorted order, which the
// inventory's resume position relies on.
func (c s3) listBuckets(ctx context.Context) ([]string, error) {
	var names []string
	q := url.Values{}
	for {
		body, err := c.call(ctx, http.MethodGet, "", "", q)
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

type listUploadsResult struct {
	EncodingType       string `xml:"EncodingType"`
	NextKeyMarker      string `xml:"NextKeyMarker"`
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	IsTruncated        bool   `xml:"IsTruncated"`
	Uploads            []struct {
		Key       string `xml:"Key"`
		UploadID  string `xml:"UploadId"`
		Initiated string `xml:"Initiated"`
	} `xml:"Upload"`
}

// uploadPage is one page of a bucket's multipart uploads.
type uploadPage struct {
	Uploads []Upload
	// Next is where the following page starts; Done says there is none.
	NextKey, NextUploadID string
	Done                  bool
}

// listUploads returns one page of at most max uploads of bucket, starting
// after the markers. Keys are asked for URL-encoded, so that any byte a key
// may hold survives the XML.
func (c s3) listUploads(ctx context.Context, bucket, keyMarker, uploadIDMarker string, max int) (uploadPage, error) {
	q := url.Values{"uploads": {""}, "encoding-type": {"url"}, "max-uploads": {strconv.Itoa(max)}}
	if keyMarker != "" {
		q.Set("key-marker", keyMarker)
		if uploadIDMarker != "" {
			q.Set("upload-id-marker", uploadIDMarker)
		}
	}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q)
	if err != nil {
		return uploadPage{}, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	var res listUploadsResult
	if err := xml.Unmarshal(body, &res); err != nil {
		return uploadPage{}, fmt.Errorf("list multipart uploads of %s: %w", bucket, err)
	}
	decode := func(s string) (string, error) { return s, nil }
	if res.EncodingType == "url" {
		decode = url.QueryUnescape
	}
	page := uploadPage{Done: !res.IsTruncated}
	for _, u := range res.Uploads {
		key, err := decode(u.Key)
		if err != nil {
			return uploadPage{}, fmt.Errorf("list multipart uploads of %s: key %q: %w", bucket, u.Key, err)
		}
		init, _ := time.Parse(time.RFC3339Nano, u.Initiated)
		page.Uploads = append(page.Uploads, Upload{Bucket: bucket, Key: key, UploadID: u.UploadID, Initiated: init})
	}
	if res.IsTruncated {
		if page.NextKey, err = decode(res.NextKeyMarker); err != nil {
			return uploadPage{}, fmt.Errorf("list multipart uploads of %s: next marker: %w", bucket, err)
		}
		page.NextUploadID = res.NextUploadIDMarker
		if page.NextKey == "" && len(page.Uploads) > 0 {
			last := page.Uploads[len(page.Uploads)-1]
			page.NextKey, page.NextUploadID = last.Key, last.UploadID
		}
		if page.NextKey == "" || (page.NextKey == keyMarker && page.NextUploadID == uploadIDMarker) {
			return uploadPage{}, fmt.Errorf("list multipart uploads of %s: truncated page without a new marker", bucket)
		}
	}
	return page, nil
}

type listPartsResult struct {
	IsTruncated          bool   `xml:"IsTruncated"`
	NextPartNumberMarker string `xml:"NextPartNumberMarker"`
	Parts                []struct {
		Size int64 `xml:"Size"`
	} `xml:"Part"`
}

// countParts counts the parts of an upload and their bytes, reading the
// whole (paginated) part list.
func (c s3) countParts(ctx context.Context, bucket, key, uploadID string) (parts int, size int64, err error) {
	marker := ""
	for {
		q := url.Values{"uploadId": {uploadID}, "max-parts": {"1000"}}
		if marker != "" {
			q.Set("part-number-marker", marker)
		}
		body, err := c.call(ctx, http.MethodGet, bucket, key, q)
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

// exists asks whether the backend still has an upload, by listing one part.
func (c s3) exists(ctx context.Context, bucket, key, uploadID string) (bool, error) {
	_, err := c.call(ctx, http.MethodGet, bucket, key, url.Values{"uploadId": {uploadID}, "max-parts": {"1"}})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, errNoSuchUpload), errors.Is(err, errNoSuchBucket):
		return false, nil
	}
	return false, err
}

// abort aborts an upload. nil means it is gone: aborted now, or
// NoSuchUpload because it already was. Any other result is unclear: the
// abort may or may not have happened.
func (c s3) abort(ctx context.Context, bucket, key, uploadID string) error {
	_, err := c.call(ctx, http.MethodDelete, bucket, key, url.Values{"uploadId": {uploadID}})
	if errors.Is(err, errNoSuchUpload) || errors.Is(err, errNoSuchBucket) {
		return nil
	}
	return err
}
