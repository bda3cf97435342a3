package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/s3err"
	"github.com/sweepgate/sweepgate/s3op"
)

func TestCheckDeclaredSize(t *testing.T) {
	for _, tc := range []struct {
		op       s3op.Operation
		declared int64
		refused  bool
	}{
		{s3op.PutObject, maxUploadSize, false},
		{s3op.PutObject, maxUploadSize + 1, true},
		{s3op.UploadPart, maxUploadSize, false},
		{s3op.UploadPart, 6 << 30, true},
		{s3op.UploadPart, -1, false}, // unknown length: the backend decides
		{s3op.PutObject, 0, false},
		// Only single uploads have the 5 GiB limit.
		{s3op.CompleteMultipartUpload, 6 << 30, false},
		{s3op.Unsupported, 6 << 30, false},
	} {
		err := checkDeclaredSize(tc.op, tc.declared)
		if got := err != nil; got != tc.refused {
			t.Errorf("%s of %d bytes: refused %v (%v), want %v", tc.op, tc.declared, got, err, tc.refused)
		}
		if e := s3err.As(err); err != nil && (e.Code != "EntityTooLarge" || e.HTTPStatus != http.StatusBadRequest) {
			t.Errorf("%s of %d bytes: %d %s, want 400 EntityTooLarge", tc.op, tc.declared, e.HTTPStatus, e.Code)
		}
	}
}

// unreadable is a request body that must not be read.
type unreadable struct{ read atomic.Bool }

func (u *unreadable) Read([]byte) (int, error) {
	u.read.Store(true)
	return 0, context.Canceled
}
func (u *unreadable) Close() error { return nil }

// TestServeRefusesOversizedUpload sends signed uploads that declare more
// than 5 GiB and checks that each is answered EntityTooLarge without a byte
// of its body read and without the backend being asked.
func TestServeRefusesOversizedUpload(t *testing.T) {
	var backendCalls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendCalls.Add(1)
	}))
	defer backend.Close()
	g := newTestGateway(t, testParts{Endpoint: backend.URL, AccessKey: "backend", SecretKey: "backend-secret"}, Config{
		Region:      "us-east-1",
		Credentials: []sigv4.Credential{{AccessKey: "AKIACLIENT", SecretKey: "client-secret", Principal: "alice"}},
	})
	for _, tc := range []struct {
		name, target, payloadHash string
		header                    map[string]string
	}{
		{"PutObject", "/b/k", "UNSIGNED-PAYLOAD", nil},
		{"UploadPart", "/b/k?partNumber=1&uploadId=u", "UNSIGNED-PAYLOAD", nil},
		{"UploadPart, signed chunks", "/b/k?partNumber=2&uploadId=u", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
			map[string]string{"X-Amz-Decoded-Content-Length": strconv.FormatInt(maxUploadSize+1, 10), "Content-Encoding": "aws-chunked"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := &unreadable{}
			r := httptest.NewRequest(http.MethodPut, "http://gw.example"+tc.target, nil)
			r.Body = body
			r.ContentLength = maxUploadSize + 1
			if tc.header != nil {
				r.ContentLength = maxUploadSize + 8<<20 // the chunk framing
			}
			for k, v := range tc.header {
				r.Header.Set(k, v)
			}
			r.Header.Set("X-Amz-Content-Sha256", tc.payloadHash)
			signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
			creds := aws.Credentials{AccessKeyID: "AKIACLIENT", SecretAccessKey: "client-secret"}
			if err := signer.SignHTTP(context.Background(), creds, r, tc.payloadHash, "s3", "us-east-1", time.Now()); err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "<Code>EntityTooLarge</Code>") {
				t.Fatalf("got %d %s, want 400 EntityTooLarge", w.Code, w.Body)
			}
			if w.Header().Get("Connection") != "close" {
				t.Errorf("Connection %q, want close: the unread body must not be taken for the next request", w.Header().Get("Connection"))
			}
			if body.read.Load() {
				t.Error("the body was read")
			}
			if n := backendCalls.Load(); n != 0 {
				t.Errorf("the backend was asked %d times", n)
			}
		})
	}
}

// TestServeRefusesForceDelete: MinIO's force-delete header, even signed,
// never reaches the backend, where it would delete everything under a name.
func TestServeRefusesForceDelete(t *testing.T) {
	var backendCalls atomic.Int32
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendCalls.Add(1)
	}))
	defer backend.Close()
	g := newTestGateway(t, testParts{Endpoint: backend.URL, AccessKey: "backend", SecretKey: "backend-secret"}, Config{
		Region:      "us-east-1",
		Credentials: []sigv4.Credential{{AccessKey: "AKIACLIENT", SecretKey: "client-secret", Principal: "alice"}},
	})
	for _, target := range []string{"/b/dir", "/b"} {
		r := httptest.NewRequest(http.MethodDelete, "http://gw.example"+target, nil)
		r.Header.Set("X-Minio-Force-Delete", "true")
		r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
		creds := aws.Credentials{AccessKeyID: "AKIACLIENT", SecretAccessKey: "client-secret"}
		if err := signer.SignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(r.Header.Get("Authorization"), "x-minio-force-delete") {
			t.Fatalf("the header is not signed: %s", r.Header.Get("Authorization"))
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "<Code>InvalidArgument</Code>") {
			t.Fatalf("DELETE %s with a signed force-delete: %d %s, want 400 InvalidArgument", target, w.Code, w.Body)
		}
	}
	if n := backendCalls.Load(); n != 0 {
		t.Errorf("the backend was asked %d times", n)
	}
}
