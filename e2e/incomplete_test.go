//go:build e2e

package e2e

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// sendTruncated sends req's head announcing its Content-Length, then only
// the first n bytes of body, then closes its sending side, as a client that
// dies mid-upload would. It returns the response, or nil if the server
// closed the connection without one.
func sendTruncated(t *testing.T, req *http.Request, body []byte, n int) *http.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	w := bufio.NewWriter(conn)
	if _, err := w.WriteString(req.Method + " " + req.URL.RequestURI() + " HTTP/1.1\r\nHost: " + req.URL.Host + "\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := req.Header.Write(w); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("\r\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body[:n]); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Logf("no response to the truncated request: %v", err)
		return nil
	}
	return resp
}

// TestIncompleteBody cuts uploads short: the object must not appear on the
// backend, and a client still listening gets IncompleteBody. The request is
// signed, so the gateway reads the body and sees it end early.
func TestIncompleteBody(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	body := harness.NewData(900, 2*mib).Bytes()

	cases := []struct {
		name string
		// req returns the signed request and its whole body.
		req func(t *testing.T, url string) (*http.Request, []byte)
	}{
		{"UNSIGNED-PAYLOAD", func(t *testing.T, url string) (*http.Request, []byte) {
			return signed(t, e, newRequest(t, http.MethodPut, url, nil), harness.UnsignedPayload), body
		}},
		{"hex SHA-256", func(t *testing.T, url string) (*http.Request, []byte) {
			return signed(t, e, newRequest(t, http.MethodPut, url, nil), harness.SHA256Hex(body)), body
		}},
		{"signed chunks", func(t *testing.T, url string) (*http.Request, []byte) {
			return signedStream(t, e, url, body, time.Now())
		}},
		{"unsigned chunks with trailer", func(t *testing.T, url string) (*http.Request, []byte) {
			req := unsignedTrailerRequest(t, e, url, body, crc32Base64(body))
			return req, unsignedTrailerBody(body, "x-amz-checksum-crc32:"+crc32Base64(body))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "incomplete/" + tc.name
			req, whole := tc.req(t, objectURL(e.Endpoint, bucket, key))
			resp := sendTruncated(t, req, whole, len(whole)/2)
			if resp != nil {
				status, code := http.StatusBadRequest, "IncompleteBody"
				if harness.DirectMode() {
					// MinIO's own answer; S3 (and so the gateway) says
					// IncompleteBody.
					status, code = 499, "ClientDisconnected"
				}
				requireS3Error(t, resp, status, code)
			}
			requireAbsent(t, direct, bucket, key)
		})
	}
}
