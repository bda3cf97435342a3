//go:build e2e

package e2e

// Limits: requests in flight, in total and per credential, and the wait
// for a request body's next bytes.

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// heldUpload is a PutObject whose head went out with Expect: 100-continue
// and whose body waits for the test. The gateway answers 100 Continue only
// when its handler first reads the body, after the request was verified
// and admitted: from then on it counts in flight, for as long as the test
// holds the body back.
type heldUpload struct {
	conn net.Conn
	br   *bufio.Reader
	body []byte
}

func holdUpload(t *testing.T, e *harness.Env, cred harness.Credential, bucket, key string) *heldUpload {
	t.Helper()
	body := []byte("held " + key)
	r := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, key), nil)
	r.ContentLength = int64(len(body))
	head := wireHead(secSign(t, e, cred, r, harness.UnsignedPayload), int64(len(body)), "Expect: 100-continue")
	conn, err := net.DialTimeout("tcp", e.Gateway.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(head); err != nil {
		t.Fatal(err)
	}
	h := &heldUpload{conn: conn, br: bufio.NewReader(conn), body: body}
	resp, err := http.ReadResponse(h.br, r)
	if err != nil {
		t.Fatalf("%s's held upload: %v", cred.AccessKey, err)
	}
	if resp.StatusCode != http.StatusContinue {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s's held upload: %s, want 100 Continue; body:\n%s", cred.AccessKey, resp.Status, b)
	}
	return h
}

// finish sends the body and returns the final answer's status.
func (h *heldUpload) finish(t *testing.T) int {
	t.Helper()
	if _, err := h.conn.Write(h.body); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(h.br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestInFlightLimits runs a gateway that serves two requests at once, one
// per credential: a credential's second request while its first is held
// gets 503 SlowDown with Retry-After while another credential is served;
// a third request while two are held gets the same, whoever sends it; the
// admin listener answers all along; each refusal is counted by its limit;
// and once the held requests end, every credential is served again.
func TestInFlightLimits(t *testing.T) {
	t.Parallel()
	creds := []harness.Credential{
		{AccessKey: "limit-a", SecretKey: "limit-a-secret-1", Principal: "a"},
		{AccessKey: "limit-b", SecretKey: "limit-b-secret-1", Principal: "b"},
		{AccessKey: "limit-c", SecretKey: "limit-c-secret-1", Principal: "c"},
	}
	a, b, c := creds[0], creds[1], creds[2]
	e := harness.Start(t, harness.Options{Credentials: creds, Config: map[string]any{
		"limits": map[string]any{"max_in_flight": 2, "max_in_flight_per_credential": 1},
	}})
	e.RequireGateway(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	plain := &http.Client{}
	get := func(t *testing.T, cred harness.Credential) *http.Response {
		t.Helper()
		return do(t, plain, secSign(t, e, cred, newRequest(t, http.MethodGet, objectURL(e.Endpoint, bucket, "")+"?list-type=2", nil), harness.EmptySHA256))
	}
	slowDown := func(t *testing.T, resp *http.Response) {
		t.Helper()
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("503 SlowDown without Retry-After")
		}
		requireRefusal(t, resp, "503 SlowDown")
	}

	heldA := holdUpload(t, e, a, bucket, "held-a")
	slowDown(t, get(t, a))
	requireStatus(t, get(t, b), http.StatusOK)
	heldB := holdUpload(t, e, b, bucket, "held-b")
	slowDown(t, get(t, c))
	resp, err := http.Get(e.Gateway.AdminEndpoint + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, resp, http.StatusOK)
	metrics, err := e.Gateway.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`sweepgate_requests_limited_total{limit="credential"} 1`, `sweepgate_requests_limited_total{limit="total"} 1`} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	for _, h := range []*heldUpload{heldA, heldB} {
		if status := h.finish(t); status != http.StatusOK {
			t.Fatalf("a held upload ended with %d", status)
		}
	}
	for _, key := range []string{"held-a", "held-b"} {
		if _, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			t.Errorf("%s on MinIO: %v", key, err)
		}
	}
	for _, cred := range creds {
		requireStatus(t, get(t, cred), http.StatusOK)
	}

	// A reload lifts the per-credential limit under the running process.
	setConfig(t, e.Gateway, func(cfg map[string]any) {
		cfg["limits"] = map[string]any{"max_in_flight": 2, "max_in_flight_per_credential": 0}
	})
	status, body := adminReload(t, e.Gateway)
	var res struct {
		RestartNeeded []string `json:"restart_needed"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || len(res.RestartNeeded) != 0 {
		t.Fatalf("reload: %d %s", status, body)
	}
	heldA = holdUpload(t, e, a, bucket, "held-a-again")
	requireStatus(t, get(t, a), http.StatusOK)
	if status := heldA.finish(t); status != http.StatusOK {
		t.Fatalf("the held upload after the reload ended with %d", status)
	}
}

// setConfig rewrites the gateway's configuration file (JSON, which YAML
// reads) with change applied, for a reload.
func setConfig(t *testing.T, g *harness.Gateway, change func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(g.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	change(cfg)
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.ConfigFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBodyReadTimeout runs a gateway that waits at most two seconds for a
// body's next bytes: a PutObject and an UploadPart whose client stops
// sending are answered 400 RequestTimeout, the connection closed, and no
// object, part or part record is left; a client that sends a byte every
// quarter second, for longer than the timeout in all, is served.
func TestBodyReadTimeout(t *testing.T) {
	t.Parallel()
	e := harness.Start(t, harness.Options{Config: map[string]any{
		"limits": map[string]any{"body_read_timeout": "2s"},
	}})
	e.RequireGateway(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)
	cred := envCred(e)
	trickle := func(t *testing.T, target string) {
		t.Helper()
		a := exchange(t, e.Gateway.Addr(), signedWireHead(t, e, cred, http.MethodPut, target, 10), []byte("abc"))
		requireWireRefusal(t, a, http.StatusBadRequest, "RequestTimeout")
	}

	t.Run("PutObject", func(t *testing.T) {
		trickle(t, objectURL(e.Endpoint, bucket, "trickled"))
		requireAbsent(t, direct, bucket, "trickled")
	})
	t.Run("UploadPart", func(t *testing.T) {
		id := createUpload(t, e.SDK(t), bucket, "trickled-part")
		trickle(t, objectURL(e.Endpoint, bucket, "trickled-part")+"?partNumber=1&uploadId="+url.QueryEscape(id))
		if got := backendPartNumbers(t, direct, bucket, "trickled-part", id); len(got) != 0 {
			t.Errorf("MinIO holds parts %v of the upload", got)
		}
		if n := etcdCount(t, e.Gateway.EtcdClient(t), etcdPrefix+"parts/"); n != 0 {
			t.Errorf("etcd holds %d part records", n)
		}
	})
	t.Run("steady", func(t *testing.T) {
		body := []byte("slow-but-steady")
		r := newRequest(t, http.MethodPut, objectURL(e.Endpoint, bucket, "steady"), nil)
		r.ContentLength = int64(len(body))
		head := wireHead(secSign(t, e, cred, r, harness.UnsignedPayload), int64(len(body)))
		conn, err := net.DialTimeout("tcp", e.Gateway.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Write(head); err != nil {
			t.Fatal(err)
		}
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := range body {
			<-tick.C
			if _, err := conn.Write(body[i : i+1]); err != nil {
				t.Fatalf("after %d bytes: %v", i, err)
			}
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("a steady client got %s: %s", resp.Status, b)
		}
		out, err := direct.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("steady")})
		if err != nil {
			t.Fatal(err)
		}
		defer out.Body.Close()
		if got, _ := io.ReadAll(out.Body); string(got) != string(body) {
			t.Errorf("MinIO holds %q", got)
		}
	})
}
