//go:build integration

package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/minio/minio-go/v7"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/multipart"
)

// logBuffer collects log output that handlers write from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// since returns the JSON log lines written from offset on, and the new
// offset.
func (l *logBuffer) since(t *testing.T, offset int) ([]map[string]any, int) {
	t.Helper()
	l.mu.Lock()
	data := bytes.Clone(l.b.Bytes()[offset:])
	end := l.b.Len()
	l.mu.Unlock()
	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines, end
}

// TestRequestIDEverywhere checks that one id names a request everywhere:
// its x-amz-request-id header, the RequestId of its S3 error document
// (whether the gateway or the backend wrote it), and every log line
// written while serving it.
func TestRequestIDEverywhere(t *testing.T) {
	t.Parallel()
	m := harness.StartMinIO(t)
	direct, err := harness.NewMinioGo(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	const bucket = "ids"
	if err := direct.MakeBucket(t.Context(), bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	cred := sigv4.Credential{AccessKey: "alicekey", SecretKey: "alice-secret-0123456789", Principal: "alice"}
	srv, etcdClient := startIDGateway(t, m, cred, logs)

	send := func(method, path, secret string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		creds := aws.Credentials{AccessKeyID: cred.AccessKey, SecretAccessKey: secret}
		if err := v4.NewSigner().SignHTTP(t.Context(), creds, req, "UNSIGNED-PAYLOAD", "s3", m.Region, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	tests := []struct {
		name, method, path, secret string
		// before runs first, to provoke the failure.
		before   func()
		wantCode string
		// wantLines are messages that must be among the request's lines.
		wantLines []string
		// backend says the error document is the backend's own.
		backend bool
	}{
		{name: "the gateway's own error", method: "GET", path: "/" + bucket + "/k", secret: "not-the-secret",
			wantCode: "SignatureDoesNotMatch"},
		{name: "the backend's error through the proxy", method: "GET", path: "/" + bucket + "/missing", secret: cred.SecretKey,
			wantCode: "NoSuchKey", backend: true},
		{name: "the backend's error through the session service", method: "PUT", path: "/" + bucket + "/k?partNumber=1&uploadId=no-such-upload", secret: cred.SecretKey,
			wantCode: "NoSuchUpload", backend: true},
		{name: "every line of a request that fails in several steps", method: "POST", path: "/" + bucket + "/k?uploads", secret: cred.SecretKey,
			// With etcd gone, the upload is created on the backend, its
			// session cannot be recorded, and the new upload is aborted.
			before:    func() { etcdClient.Close() },
			wantCode:  "ServiceUnavailable",
			wantLines: []string{"create multipart upload: session not recorded; aborting the new upload", "multipart call failed"}},
	}
	offset := 0
	for _, tt := range tests {
		// Not parallel: each case reads the log lines its request wrote.
		if tt.before != nil {
			tt.before()
		}
		_, offset = logs.since(t, offset)
		resp := send(tt.method, tt.path, tt.secret)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		header := resp.Header.Get("X-Amz-Request-Id")
		var doc struct {
			Code      string `xml:"Code"`
			RequestID string `xml:"RequestId"`
		}
		if err := xml.Unmarshal(body, &doc); err != nil || doc.Code != tt.wantCode {
			t.Errorf("%s: %d %s, want an error document with code %s (%v)", tt.name, resp.StatusCode, body, tt.wantCode, err)
			continue
		}
		if header == "" || doc.RequestID != header {
			t.Errorf("%s: x-amz-request-id %q, RequestId %q in %s; want them equal", tt.name, header, doc.RequestID, body)
		}
		lines, end := logs.since(t, offset)
		offset = end
		var msgs []string
		for _, l := range lines {
			msgs = append(msgs, l["msg"].(string))
			if l["id"] != header {
				t.Errorf("%s: log line without the request's id %q: %v", tt.name, header, l)
			}
			if l["msg"] == "request" && tt.backend {
				if b, _ := l["backend_id"].(string); b == "" || b == header {
					t.Errorf("%s: the request line should keep the backend's own id apart: %v", tt.name, l)
				}
			}
		}
		for _, want := range append([]string{"request"}, tt.wantLines...) {
			if !strings.Contains(strings.Join(msgs, "\n"), want) {
				t.Errorf("%s: no log line %q among %q", tt.name, want, msgs)
			}
		}
	}
}

// startIDGateway starts a gateway in front of m that accepts cred, has
// sessions in a fresh etcd and logs to logs as JSON, debug lines included.
// It returns the gateway's server and the etcd client its sessions use.
func startIDGateway(t *testing.T, m *harness.MinIO, cred sigv4.Credential, logs *logBuffer) (*httptest.Server, *clientv3.Client) {
	t.Helper()
	_, etcdClient := etcdtest.Start(t)
	keys, err := etcdstore.NewKeys("/ids-test/")
	if err != nil {
		t.Fatal(err)
	}
	g := newTestGateway(t, testParts{
		Endpoint: m.Endpoint, Region: m.Region, AccessKey: m.AccessKey, SecretKey: m.SecretKey,
		Sessions: &multipart.Config{Store: etcdstore.NewStore(etcdClient, keys)},
	}, Config{
		Credentials: []sigv4.Credential{cred},
		Logger:      slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return srv, etcdClient
}
