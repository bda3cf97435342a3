//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// The security tests attack the real binary the way a
// hostile client, a leaked URL or a careless operator would, and check what
// a user relies on: that another principal cannot touch their uploads, that
// a presigned URL does only what it was signed for and only while it is
// valid, that nothing unsigned rides along on a signed request, that
// oversized requests are refused before the gateway reads them, that the
// admin API needs its token, and that no secret ends up in a log, a metric
// or a help text. They extend refusal_test.go and sessions_rules_test.go
// where those stop.

// The principals of the security tests, with secrets distinctive enough to
// search for.
var (
	secAlice = harness.Credential{AccessKey: "AKIASECALICE", SecretKey: "alice-Secr3t-9f2c1e7d5b3a", Principal: "alice"}
	secBob   = harness.Credential{AccessKey: "AKIASECBOB", SecretKey: "bob-Secr3t-4a8e6c2f1d0b", Principal: "bob"}
	secOps   = harness.Credential{AccessKey: "AKIASECOPS", SecretKey: "ops-Secr3t-7c5a3e1b9d2f", Principal: "ops"}
)

// wirePrompt bounds how long a refusal that needs no body may take: the
// gateway answers from the headers alone, so anything near a timeout means
// it waited for bytes that were never sent.
const wirePrompt = 5 * time.Second

// secSign signs req in its Authorization header with c at the current time.
func secSign(t *testing.T, e *harness.Env, c harness.Credential, req *http.Request, payloadHash string) *http.Request {
	t.Helper()
	if err := harness.SignV4(t.Context(), req, c.AccessKey, c.SecretKey, e.Region, payloadHash, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// secPresign returns a presigned URL for method on u, signed by c at at.
func secPresign(t *testing.T, e *harness.Env, c harness.Credential, method, u string, at time.Time, expires time.Duration) string {
	t.Helper()
	signed, _, err := harness.PresignV4(t.Context(), newRequest(t, method, u, nil), c.AccessKey, c.SecretKey, e.Region, at, expires)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

// envCred is the credential a harness.Env's clients use by default.
func envCred(e *harness.Env) harness.Credential {
	return harness.Credential{AccessKey: e.AccessKey, SecretKey: e.SecretKey}
}

// requireRefusal checks that resp is an S3 error whose "STATUS CODE" is one
// of allowed, with a request id, and closes its body.
func requireRefusal(t *testing.T, resp *http.Response, allowed ...string) {
	t.Helper()
	e, body, err := harness.ReadS3Error(resp)
	if err != nil {
		t.Fatalf("%s: %v; body:\n%s", resp.Status, err, body)
	}
	got := fmt.Sprintf("%d %s", resp.StatusCode, e.Code)
	if !slices.Contains(allowed, got) {
		t.Fatalf("got %s (%s), want one of %q", got, e.Message, allowed)
	}
	requireRequestID(t, resp)
}

// wireHead renders a request's line and headers as they go on the wire,
// with Content-Length n (none when n < 0) and extra raw header lines, for
// requests that net/http would not send (or not send that way).
func wireHead(req *http.Request, n int64, extra ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", req.Method, req.URL.RequestURI(), req.URL.Host)
	if n >= 0 {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", n)
	}
	for _, l := range extra {
		b.WriteString(l + "\r\n")
	}
	_ = req.Header.Write(&b)
	b.WriteString("\r\n")
	return b.Bytes()
}

// wireAnswer is what came back on a raw connection.
type wireAnswer struct {
	status int
	header http.Header
	body   []byte
	// took is the time from dialing to the complete answer.
	took time.Duration
	// closed says the gateway closed the connection after answering.
	closed bool
}

// code returns the S3 error code in the answer's body, or "".
func (a wireAnswer) code() string { return answer{body: a.body}.errorCode() }

// exchange sends head and body (nil: nothing, so that a request announcing
// a body waits for bytes that never come) on a new connection to addr,
// reads one answer, and looks whether the connection is then closed. It
// fails the test if no answer arrives within wirePrompt.
//
// Head and body go out in one write. A request of up to 4 KiB (what Go's
// server reads at a time) thus reaches the gateway over loopback as one
// segment, which its first read takes whole: when it refuses the request
// from its head and closes at once (as Go's server does for bad framing),
// no byte of the request is left unread or still to come, so the close is
// a FIN. Were the body sent after the head, it could arrive after that
// read, and the kernel would answer it (or the close with bytes unread)
// with a RST, which can destroy the answer before the client has read it.
func exchange(t *testing.T, addr string, head, body []byte) wireAnswer {
	t.Helper()
	start := time.Now()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(start.Add(wirePrompt)); err != nil {
		t.Fatal(err)
	}
	request := append(slices.Clip(head), body...)
	go func() {
		// A large request may be answered and closed before all of it
		// went out.
		_, _ = conn.Write(request)
	}()
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %v (%v): the gateway is waiting for what the client never sends", time.Since(start).Round(time.Millisecond), err)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s: reading the answer's body: %v", resp.Status, err)
	}
	a := wireAnswer{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}
	if err := conn.SetReadDeadline(time.Now().Add(3 * time.Second)); err != nil {
		t.Fatal(err)
	}
	_, err = br.ReadByte()
	var ne net.Error
	a.closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	return a
}

// requireWireRefusal checks a raw answer: status and (when not empty) S3
// error code, in time, and the connection closed after it, so that the
// body the client announced is never taken for another request.
func requireWireRefusal(t *testing.T, a wireAnswer, status int, code string) {
	t.Helper()
	if a.status != status || (code != "" && a.code() != code) {
		t.Fatalf("got %d %q, want %d %s; body:\n%s", a.status, a.code(), status, code, a.body)
	}
	if a.took > wirePrompt {
		t.Fatalf("the answer took %v", a.took)
	}
	if !a.closed {
		t.Fatalf("%d %s: the gateway kept the connection open after refusing a request whose body it did not read", a.status, code)
	}
}

// proxiedTo counts the requests the fault proxy passed on to MinIO that
// would change or read bucket's objects (object paths, or any method but a
// listing's GET on the bucket), leaving out the reclaimer's listings.
func proxiedTo(p *harness.FaultProxy, buckets ...string) []harness.ProxiedRequest {
	return p.Find(func(r harness.ProxiedRequest) bool {
		for _, b := range buckets {
			if strings.HasPrefix(r.Path, "/"+b+"/") || (r.Path == "/"+b && r.Method != http.MethodGet) {
				return true
			}
		}
		return false
	})
}

func describeProxied(rs []harness.ProxiedRequest) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s?%s", r.Method, r.Path, r.Query.Encode()))
	}
	return strings.Join(out, "\n  ")
}

// randomToken returns n random bytes in hex.
func randomToken(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
