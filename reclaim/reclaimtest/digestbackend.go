//go:build integration

package reclaimtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sweepgate/sweepgate/multipart"
)

// DigestBackend is the real backend client, counting the DeleteObjects
// requests sent through it, optionally losing or dropping them, and
// calling the function SetOnUploads set before each ListMultipartUploads;
// BlobUploads counts those that ask about a key in the blobs' namespace
// (the digest sweep's).
type DigestBackend struct {
	multipart.Backend
	// Deletes counts the DeleteObjects requests sent.
	Deletes     atomic.Int64
	BlobUploads atomic.Int64
	// LoseDelete: the backend deletes, the answer is lost.
	LoseDelete atomic.Bool
	// DropDelete: the request never reaches the backend, and the caller
	// gets no answer.
	DropDelete atomic.Bool
	// Late, when set, holds the next DeleteObjects until its client gave
	// up, answers the client with that, and delivers the request to the
	// backend once Late.Release is closed (Late.Done gets the outcome).
	Late        atomic.Pointer[LateDelete]
	mu          sync.Mutex
	onUploads   func()
	afterDelete func()
}

// RoundTrip sends req to the backend, counting and faulting as the fields
// say.
func (b *DigestBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method == http.MethodPost && q.Has("delete") {
		b.Deletes.Add(1)
		if l := b.Late.Swap(nil); l != nil {
			return l.hold(b.Backend, req)
		}
		if b.DropDelete.Load() {
			return nil, errors.New("connection reset (request dropped by the test)")
		}
		resp, err := b.Backend.RoundTrip(req)
		b.mu.Lock()
		f := b.afterDelete
		b.mu.Unlock()
		if f != nil {
			f()
		}
		if err == nil && b.LoseDelete.Load() {
			resp.Body.Close()
			return nil, errors.New("read tcp: i/o timeout (answer lost by the test)")
		}
		return resp, err
	}
	if req.Method == http.MethodGet && q.Has("uploads") {
		if strings.HasPrefix(q.Get("prefix"), BlobPrefix) {
			b.BlobUploads.Add(1)
		}
		b.mu.Lock()
		f := b.onUploads
		b.mu.Unlock()
		if f != nil {
			f()
		}
	}
	return b.Backend.RoundTrip(req)
}

// LateDelete is a DeleteObjects request the backend executes after its
// client gave up on it.
type LateDelete struct {
	// Release, closed by the test, delivers the request to the backend.
	Release chan struct{}
	// Done gets the outcome of the delivered request.
	Done chan error
}

// NewLateDelete returns a LateDelete to set on DigestBackend.Late.
func NewLateDelete() *LateDelete {
	return &LateDelete{Release: make(chan struct{}), Done: make(chan error, 1)}
}

// hold keeps req until its client gives up, then delivers it to next once
// l.Release is closed.
func (l *LateDelete) hold(next http.RoundTripper, req *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	<-req.Context().Done()
	late := req.Clone(context.Background())
	late.Body = io.NopCloser(bytes.NewReader(body))
	go func() {
		<-l.Release
		resp, err := next.RoundTrip(late)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("late delete answered %s", resp.Status)
			}
		}
		l.Done <- err
	}()
	return nil, fmt.Errorf("client gave up on the request: %w", req.Context().Err())
}

// SetOnUploads makes f run before each ListMultipartUploads (nil: none).
func (b *DigestBackend) SetOnUploads(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.onUploads = f
}

// SetAfterDelete makes f run after each DeleteObjects reached the backend
// (nil: none).
func (b *DigestBackend) SetAfterDelete(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.afterDelete = f
}
