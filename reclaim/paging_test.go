//go:build integration

package reclaim_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/multipart"
)

// pagingBackend cuts MinIO's ListMultipartUploads answers into pages of
// size uploads in (key, upload id) order, from the request's key-marker
// and upload-id-marker on, as a backend that honours max-uploads does.
// MinIO itself answers a bucket whole, so only this shim can show that
// the inventory follows the markers from page to page.
type pagingBackend struct {
	multipart.Backend
	size  int
	lists atomic.Int64
}

type pagedListing struct {
	XMLName            xml.Name      `xml:"ListMultipartUploadsResult"`
	Bucket             string        `xml:"Bucket"`
	KeyMarker          string        `xml:"KeyMarker"`
	UploadIDMarker     string        `xml:"UploadIdMarker"`
	NextKeyMarker      string        `xml:"NextKeyMarker"`
	NextUploadIDMarker string        `xml:"NextUploadIdMarker"`
	MaxUploads         int           `xml:"MaxUploads"`
	IsTruncated        bool          `xml:"IsTruncated"`
	Uploads            []pagedUpload `xml:"Upload"`
}

type pagedUpload struct {
	Key       string `xml:"Key"`
	UploadID  string `xml:"UploadId"`
	Initiated string `xml:"Initiated"`
}

func (b *pagingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method != http.MethodGet || !q.Has("uploads") {
		return b.Backend.RoundTrip(req)
	}
	b.lists.Add(1)
	resp, err := b.Backend.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var all pagedListing
	if err := xml.Unmarshal(body, &all); err != nil {
		return nil, err
	}
	less := func(k, id, k2, id2 string) bool { return k < k2 || k == k2 && id < id2 }
	slices.SortFunc(all.Uploads, func(a, c pagedUpload) int {
		switch {
		case less(a.Key, a.UploadID, c.Key, c.UploadID):
			return -1
		case less(c.Key, c.UploadID, a.Key, a.UploadID):
			return 1
		}
		return 0
	})
	km, um := q.Get("key-marker"), q.Get("upload-id-marker")
	page := pagedListing{Bucket: all.Bucket, KeyMarker: km, UploadIDMarker: um, MaxUploads: b.size}
	for _, u := range all.Uploads {
		if km != "" && !less(km, um, u.Key, u.UploadID) {
			continue
		}
		if len(page.Uploads) == b.size {
			page.IsTruncated = true
			break
		}
		page.Uploads = append(page.Uploads, u)
	}
	if page.IsTruncated {
		last := page.Uploads[len(page.Uploads)-1]
		page.NextKeyMarker, page.NextUploadIDMarker = last.Key, last.UploadID
	}
	out, err := xml.Marshal(page)
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	resp.ContentLength = int64(len(out))
	resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
	return resp, nil
}

// TestInventoryFollowsPages: with a backend that pages its listing of
// uploads, a pass lists each page once, after the markers of the one
// before, and judges every upload of the bucket exactly once.
func TestInventoryFollowsPages(t *testing.T) {
	e := newEnv(t)
	e.Bucket("paged")
	now := e.Clock.Now()
	for i := range 5 {
		key := "obj-" + strconv.Itoa(i)
		id := e.Upload("paged", key, 1)
		e.session("paged", key, id, etcdstore.StateActive, now.Add(-time.Hour), now.Add(-time.Minute))
	}
	paging := &pagingBackend{Backend: e.Backend, size: 2}
	cfg := e.Config()
	cfg.Backend = paging
	r := e.Start(cfg)
	// Listing the same page again and again never ends: the deadline
	// turns that into a failure.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	plan, err := r.Plan(ctx)
	if err != nil {
		t.Fatalf("plan over a paged listing: %v (%d listings sent)", err, paging.lists.Load())
	}
	wantUploads(t, plan.Uploads, count(5, 5), count(0, 0), count(0, 0), count(0, 0))
	if got := paging.lists.Load(); got != 3 {
		t.Errorf("the plan listed %d pages of the bucket, want 3 (5 uploads, 2 a page)", got)
	}
}
