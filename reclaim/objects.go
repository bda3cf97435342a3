package reclaim

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// errNoSuchKey says the backend does not have the object.
var errNoSuchKey = errors.New("reclaim: backend has no such object")

// Object is one object of a backend listing.
type Object struct {
	Key      string
	Size     int64
	ETag     string
	Modified time.Time
}

type listObjectsResult struct {
	EncodingType          string `xml:"EncodingType"`
	IsTruncated           bool   `xml:"IsTruncated"`
	NextContinuationToken string `xml:"NextContinuationToken"`
	Contents              []struct {
		Key          string `xml:"Key"`
		Size         int64  `xml:"Size"`
		ETag         string `xml:"ETag"`
		LastModified string `xml:"LastModified"`
	} `xml:"Contents"`
}

// objectPage is one page of a listing.
type objectPage struct {
	Objects []Object
	// Next is the key to start the following page after; Done says there
	// is none.
	Next string
	Done bool
}

// listObjects returns one page of at most max objects of bucket under
// prefix whose keys sort after startAfter ("" for the beginning). Resuming
// from a key rather than a continuation token lets a killed pass resume
// from its recorded position with any backend.
func (c s3) listObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (objectPage, error) {
	q := url.Values{"list-type": {"2"}, "encoding-type": {"url"}, "max-keys": {strconv.Itoa(max)}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if startAfter != "" {
		q.Set("start-after", startAfter)
	}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q)
	if err != nil {
		return objectPage{}, fmt.Errorf("list objects of %s/%s: %w", bucket, prefix, err)
	}
	var res listObjectsResult
	if err := xml.Unmarshal(body, &res); err != nil {
		return objectPage{}, fmt.Errorf("list objects of %s/%s: %w", bucket, prefix, err)
	}
	decode := func(s string) (string, error) { return s, nil }
	if res.EncodingType == "url" {
		decode = url.QueryUnescape
	}
	page := objectPage{Done: !res.IsTruncated}
	for _, o := range res.Contents {
		key, err := decode(o.Key)
		if err != nil {
			return objectPage{}, fmt.Errorf("list objects of %s: key %q: %w", bucket, o.Key, err)
		}
		mod, _ := time.Parse(time.RFC3339Nano, o.LastModified)
		page.Objects = append(page.Objects, Object{Key: key, Size: o.Size, ETag: strings.Trim(o.ETag, `"`), Modified: mod})
	}
	if n := len(page.Objects); n > 0 {
		page.Next = page.Objects[n-1].Key
	}
	if res.IsTruncated && (page.Next == "" || page.Next <= startAfter) {
		return objectPage{}, fmt.Errorf("list objects of %s/%s: truncated page that does not move forward", bucket, prefix)
	}
	return page, nil
}

// objectInfo is what a HEAD says about an object.
type objectInfo struct {
	Size int64
	ETag string
}

// headObject returns an object's size and ETag, and errNoSuchKey when it
// does not exist. Any other failure is an error: existence unknown.
func (c s3) headObject(ctx context.Context, bucket, key string) (objectInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.b.NewRequest(ctx, http.MethodHead, bucket, key, nil)
	if err != nil {
		return objectInfo{}, err
	}
	resp, err := c.b.RoundTrip(req)
	if err != nil {
		return objectInfo{}, fmt.Errorf("no answer from the backend: %w", err)
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return objectInfo{}, errNoSuchKey
	case resp.StatusCode/100 != 2:
		return objectInfo{}, &statusError{Status: resp.StatusCode}
	}
	return objectInfo{Size: resp.ContentLength, ETag: strings.Trim(resp.Header.Get("ETag"), `"`)}, nil
}

// errTooLarge says an object is larger than the caller reads.
var errTooLarge = errors.New("reclaim: object larger than the parse limit")

// getObject reads an object whole, at most limit bytes (errTooLarge past
// it), with its ETag. A missing object is errNoSuchKey.
func (c s3) getObject(ctx context.Context, bucket, key string, limit int64) ([]byte, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.b.NewRequest(ctx, http.MethodGet, bucket, key, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.b.RoundTrip(req)
	if err != nil {
		return nil, "", fmt.Errorf("no answer from the backend: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", errNoSuchKey
	case resp.StatusCode/100 != 2:
		return nil, "", &statusError{Status: resp.StatusCode}
	case resp.ContentLength > limit:
		return nil, "", errTooLarge
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s/%s: %w", bucket, key, err)
	}
	if int64(len(body)) > limit {
		return nil, "", errTooLarge
	}
	return body, strings.Trim(resp.Header.Get("ETag"), `"`), nil
}

type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool     `xml:"Quiet"`
	Objects []struct {
		Key string `xml:"Key"`
	} `xml:"Object"`
}

type deleteResult struct {
	Deleted []struct {
		Key string `xml:"Key"`
	} `xml:"Deleted"`
	Errors []struct {
		Key     string `xml:"Key"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	} `xml:"Error"`
}

// deleteObjects deletes up to 1000 keys of bucket in one request. It
// returns the keys the backend reported failing, with their error codes;
// every other key is gone (deleted now, or already absent). An error means
// the outcome is unknown for every key: list again.
func (c s3) deleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	if len(keys) > 1000 {
		return nil, fmt.Errorf("reclaim: %d keys in one delete, at most 1000", len(keys))
	}
	var dr deleteRequest
	dr.Quiet = true
	dr.Objects = make([]struct {
		Key string `xml:"Key"`
	}, len(keys))
	for i, k := range keys {
		dr.Objects[i].Key = k
	}
	body, err := xml.Marshal(dr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := c.b.NewRequest(ctx, http.MethodPost, bucket, "", url.Values{"delete": {""}})
	if err != nil {
		return nil, err
	}
	sum := md5.Sum(body)
	req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	req.Header.Set("Content-Type", "application/xml")
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	resp, err := c.b.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("no answer from the backend: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, maxBackendBody))
	if err != nil {
		return nil, fmt.Errorf("read delete answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, &statusError{Status: resp.StatusCode}
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
