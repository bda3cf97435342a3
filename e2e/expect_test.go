//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestExpectContinue sends PUTs with Expect: 100-continue over a raw
// connection, as curl and the SDKs do for large bodies: the body goes only
// after the server's 100 Continue, and a request refused on its headers gets
// its final answer without the body ever being sent.
func TestExpectContinue(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	d := harness.NewData(600, 3*mib)
	body := d.Bytes()

	// send writes the request's head, waits for the first response, and
	// sends the body only if that was 100 Continue. It returns the interim
	// status (0 if none) and the final response.
	send := func(t *testing.T, req *http.Request) (int, *http.Response) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(60 * time.Second)); err != nil {
			t.Fatal(err)
		}
		var head bytes.Buffer
		fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", req.Method, req.URL.RequestURI(), u.Host, len(body))
		if err := req.Header.Write(&head); err != nil {
			t.Fatal(err)
		}
		head.WriteString("\r\n")
		if _, err := conn.Write(head.Bytes()); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		first, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("reading the answer to the head: %v", err)
		}
		if first.StatusCode != http.StatusContinue {
			b := new(bytes.Buffer)
			_, _ = b.ReadFrom(first.Body)
			first.Body.Close()
			first.Body = nopReadCloser{bytes.NewReader(b.Bytes())}
			return 0, first
		}
		if _, err := conn.Write(body); err != nil {
			t.Fatal(err)
		}
		final, err := http.ReadResponse(br, req)
		if err != nil {
			t.Fatalf("reading the final answer: %v", err)
		}
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(final.Body)
		final.Body.Close()
		final.Body = nopReadCloser{bytes.NewReader(b.Bytes())}
		return http.StatusContinue, final
	}

	t.Run("accepted", func(t *testing.T) {
		req := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "continued"), nil)
		req.ContentLength = int64(len(body))
		req.Header.Set("Expect", "100-continue")
		signed(t, e, req, harness.SHA256Hex(body))
		interim, resp := send(t, req)
		if interim != http.StatusContinue {
			t.Fatalf("no 100 Continue; the first answer was %s", resp.Status)
		}
		requireStatus(t, resp, http.StatusOK)
		requireObject(t, direct, bucket, "continued", d)
	})

	t.Run("refused before the body", func(t *testing.T) {
		req := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "not-continued"), nil)
		req.ContentLength = int64(len(body))
		req.Header.Set("Expect", "100-continue")
		if err := harness.SignV4(t.Context(), req, e.AccessKey, "wrong secret", e.Region, harness.SHA256Hex(body), time.Now()); err != nil {
			t.Fatal(err)
		}
		interim, resp := send(t, req)
		if interim == http.StatusContinue {
			t.Fatalf("the server asked for the body of a request it refuses (final answer %s)", resp.Status)
		}
		requireS3Error(t, resp, http.StatusForbidden, "SignatureDoesNotMatch")
		requireAbsent(t, direct, bucket, "not-continued")
	})
}

type nopReadCloser struct{ *bytes.Reader }

func (nopReadCloser) Close() error { return nil }
