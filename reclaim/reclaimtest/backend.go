//go:build integration

package reclaimtest

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sweepgate/sweepgate/multipart"
)

// CountingBackend is the real backend client, counting the aborts sent
// through it and optionally losing their answers.
type CountingBackend struct {
	multipart.Backend
	// Aborts counts the AbortMultipartUpload requests sent.
	Aborts atomic.Int64
	// LoseAbortAnswer makes an abort reach the backend but its answer get
	// lost, as a timed-out response would.
	LoseAbortAnswer atomic.Bool
	// Hidden is an upload id left out of ListMultipartUploads answers, as
	// MinIO leaves out the uploads made before it last started.
	Hidden atomic.Value
	// date, when set, is the backend's clock: every answer's Date header
	// is rewritten from it, so that a backend shares the test's clock
	// (MinIO's own is the machine's, which the test does not move).
	date atomic.Pointer[func() time.Time]
	// FailListParts makes every ListParts fail as a broken connection
	// would.
	FailListParts atomic.Bool
	// ListParts counts the ListParts requests sent.
	ListParts atomic.Int64
}

// RoundTrip sends req to the backend, counting and faulting as the fields
// say.
func (b *CountingBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	isAbort := req.Method == http.MethodDelete && req.URL.Query().Has("uploadId")
	if isAbort {
		b.Aborts.Add(1)
	}
	if req.Method == http.MethodGet && req.URL.Query().Has("uploadId") {
		b.ListParts.Add(1)
	}
	if req.Method == http.MethodGet && req.URL.Query().Has("uploadId") && b.FailListParts.Load() {
		return nil, fmt.Errorf("read tcp: connection reset by peer (list parts failed by the test)")
	}
	resp, err := b.Backend.RoundTrip(req)
	if f := b.date.Load(); err == nil && f != nil {
		resp.Header.Set("Date", (*f)().UTC().Format(http.TimeFormat))
	}
	if err == nil && isAbort && b.LoseAbortAnswer.Load() {
		resp.Body.Close()
		return nil, fmt.Errorf("read tcp: i/o timeout (answer lost by the test)")
	}
	if id, _ := b.Hidden.Load().(string); err == nil && id != "" && req.Method == http.MethodGet && req.URL.Query().Has("uploads") {
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		s := string(body)
		if i := strings.Index(s, "<UploadId>"+id+"</UploadId>"); i >= 0 {
			start := strings.LastIndex(s[:i], "<Upload>")
			end := i + strings.Index(s[i:], "</Upload>") + len("</Upload>")
			s = s[:start] + s[end:]
		}
		resp.Body = io.NopCloser(strings.NewReader(s))
		resp.ContentLength = int64(len(s))
		resp.Header.Del("Content-Length")
	}
	return resp, err
}
