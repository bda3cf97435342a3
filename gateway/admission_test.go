package gateway

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/sweepgate/sweepgate/clientip"
	"github.com/sweepgate/sweepgate/gateway/sigv4"
	"github.com/sweepgate/sweepgate/s3err"
)

// signedGet returns a GET of target signed with the access key ak (whose
// secret is ak+"-secret"), from remote.
func signedGet(t testing.TB, target, ak, remote string) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "http://gw.example"+target, nil)
	r.RemoteAddr = remote
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	creds := aws.Credentials{AccessKeyID: ak, SecretAccessKey: ak + "-secret"}
	if err := signer.SignHTTP(context.Background(), creds, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	return r
}

func testCredentials(keys ...string) []sigv4.Credential {
	var creds []sigv4.Credential
	for _, k := range keys {
		creds = append(creds, sigv4.Credential{AccessKey: k, SecretKey: k + "-secret", Principal: k})
	}
	return creds
}

// TestClientAddrReachesBackend: the backend hears of the client's address
// in X-Forwarded-For alone: the peer's own address, whatever forwarding
// headers an untrusted peer sends, and the right-most untrusted
// X-Forwarded-For entry behind a trusted proxy.
func TestClientAddrReachesBackend(t *testing.T) {
	got := make(chan http.Header, 1)
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer be.Close()
	trusted, err := clientip.ParseTrusted([]string{"10.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	g := newTestGateway(t, testParts{Endpoint: be.URL, AccessKey: "backend", SecretKey: "backend-secret"}, Config{
		Region: "us-east-1", Credentials: testCredentials("AKIAONE"), Trusted: trusted,
	})
	for _, tc := range []struct {
		remote string
		xff    []string
		want   string
	}{
		{"192.0.2.1:1234", nil, "192.0.2.1"},
		{"192.0.2.1:1234", []string{"198.51.100.7"}, "192.0.2.1"},                // an untrusted client's own header
		{"10.0.0.1:1234", []string{"203.0.113.1, 198.51.100.7"}, "198.51.100.7"}, // behind a trusted proxy
		{"10.0.0.1:1234", []string{"198.51.100.7, 10.0.0.2"}, "198.51.100.7"},    // behind two
		{"10.0.0.1:1234", nil, "10.0.0.1"},
	} {
		r := signedGet(t, "/b/k", "AKIAONE", tc.remote)
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		r.Header.Set("X-Real-Ip", "203.0.113.99")
		r.Header.Set("Forwarded", "for=203.0.113.99")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%s %q: status %d %s", tc.remote, tc.xff, w.Code, w.Body)
		}
		h := <-got
		if xff := h.Values("X-Forwarded-For"); len(xff) != 1 || xff[0] != tc.want {
			t.Errorf("%s %q: the backend got X-Forwarded-For %q, want %q", tc.remote, tc.xff, xff, tc.want)
		}
		if h.Get("X-Real-Ip") != "" || h.Get("Forwarded") != "" {
			t.Errorf("%s: the client's X-Real-Ip or Forwarded reached the backend", tc.remote)
		}
	}
	g.SetTrusted(clientip.Trusted{})
	r := signedGet(t, "/b/k", "AKIAONE", "10.0.0.1:1234")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	g.ServeHTTP(httptest.NewRecorder(), r)
	if xff := (<-got).Get("X-Forwarded-For"); xff != "10.0.0.1" {
		t.Errorf("after SetTrusted trusts nobody, the backend got X-Forwarded-For %q, want the peer 10.0.0.1", xff)
	}
}

// panicWriter is a client connection whose answer fails by panicking, as
// net/http's handlers do to abort a response.
type panicWriter struct{ *httptest.ResponseRecorder }

func (panicWriter) WriteHeader(int) { panic(http.ErrAbortHandler) }

// TestInFlightModel runs a generated sequence of requests under both
// in-flight limits against a backend that holds each one until the
// sequence lets it go, answered, failed, dropped, or with the client's
// answer panicking. After every step the gateway's counts must be the
// model's: a request is admitted exactly when neither limit is reached,
// and every way a request ends gives its counts back.
func TestInFlightModel(t *testing.T) {
	const maxTotal, maxPerKey = 5, 2
	keys := []string{"AKIAONE", "AKIATWO", "AKIATHREE"}
	be, hold := holdingBackend(t)
	g := newTestGateway(t, testParts{Endpoint: be.URL, AccessKey: "backend", SecretKey: "backend-secret"}, Config{
		Region: "us-east-1", Credentials: testCredentials(keys...),
		Limits: Limits{MaxInFlight: maxTotal, MaxInFlightPerCredential: maxPerKey},
	})

	type running struct {
		name, key, mode string
		h               *held
		done            chan struct{}
	}
	var inflight []running
	model := map[string]int64{}
	var modelTotal int64
	rng := rand.New(rand.NewPCG(7, 11))
	for step := range 400 {
		if len(inflight) == 0 || rng.IntN(2) == 0 {
			key := keys[rng.IntN(len(keys))]
			name := fmt.Sprintf("k%d", step)
			admit := modelTotal < maxTotal && model[key] < maxPerKey
			h := hold(name)
			done := make(chan struct{})
			mode := []string{"ok", "error", "drop", "panic"}[rng.IntN(4)]
			var w http.ResponseWriter = httptest.NewRecorder()
			if mode == "panic" {
				w = panicWriter{httptest.NewRecorder()}
			}
			rec := &statusRecorder{ResponseWriter: w}
			go func() {
				defer close(done)
				defer func() { _ = recover() }()
				g.ServeHTTP(rec, signedGet(t, "/b/"+name, key, "192.0.2.1:1"))
			}()
			select {
			case <-h.arrived:
				if !admit {
					t.Fatalf("step %d: %s admitted over the limits (model: %d in total, %d for the key)", step, key, modelTotal, model[key])
				}
				inflight = append(inflight, running{name: name, key: key, mode: mode, h: h, done: done})
				modelTotal++
				model[key]++
			case <-done:
				if admit {
					t.Fatalf("step %d: %s refused with %d under the limits", step, key, rec.code)
				}
				if rec.code != http.StatusServiceUnavailable || rec.header.Get("Retry-After") == "" {
					t.Fatalf("step %d: refused with %d, Retry-After %q; want 503 with Retry-After", step, rec.code, rec.header.Get("Retry-After"))
				}
			}
		} else {
			i := rng.IntN(len(inflight))
			r := inflight[i]
			inflight = append(inflight[:i], inflight[i+1:]...)
			r.h.finish <- r.mode
			<-r.done
			modelTotal--
			model[r.key]--
		}
		if got := g.inFlight.total.Load(); got != modelTotal {
			t.Fatalf("step %d: %d in flight in total, model %d", step, got, modelTotal)
		}
		for _, k := range keys {
			if got := g.inFlight.keyCount(k); got != model[k] {
				t.Fatalf("step %d: %d in flight for %s, model %d", step, got, k, model[k])
			}
		}
	}
	for _, r := range inflight {
		r.h.finish <- r.mode
		<-r.done
	}
	if n, m := g.inFlight.total.Load(), len(g.inFlight.byKey); n != 0 || m != 0 {
		t.Errorf("after every request ended: %d in flight, %d keys counted", n, m)
	}
}

// statusRecorder notes the status and headers a request was answered with,
// before its writer (which may panic) sees them.
type statusRecorder struct {
	http.ResponseWriter
	mu     sync.Mutex
	code   int
	header http.Header
}

func (s *statusRecorder) WriteHeader(code int) {
	s.mu.Lock()
	if s.code == 0 {
		s.code, s.header = code, s.ResponseWriter.Header().Clone()
	}
	s.mu.Unlock()
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.code == 0 {
		s.code, s.header = http.StatusOK, s.ResponseWriter.Header().Clone()
	}
	s.mu.Unlock()
	return s.ResponseWriter.Write(p)
}

// stalledBody gives its first bytes, then fails as a connection whose read
// deadline passed does.
type stalledBody struct{ sent bool }

func (b *stalledBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		return copy(p, "some"), nil
	}
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}
func (b *stalledBody) Close() error { return nil }

// TestBodyReadTimeoutAnswer: an upload whose client stops sending is
// answered 400 RequestTimeout, whatever the backend made of the cut-off
// body, and the backend never receives the body whole.
func TestBodyReadTimeoutAnswer(t *testing.T) {
	var got sync.Map
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		got.Store(r.URL.Path, fmt.Sprintf("%d bytes, %v", len(b), err))
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "<Error><Code>IncompleteBody</Code></Error>")
	}))
	defer be.Close()
	g := newTestGateway(t, testParts{Endpoint: be.URL, AccessKey: "backend", SecretKey: "backend-secret"}, Config{
		Region: "us-east-1", Credentials: testCredentials("AKIAONE"), Limits: Limits{BodyReadTimeout: time.Minute},
	})
	r := httptest.NewRequest(http.MethodPut, "http://gw.example/b/k", nil)
	r.Body, r.ContentLength = &stalledBody{}, 10
	r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "AKIAONE", SecretAccessKey: "AKIAONE-secret"}, r, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "<Code>RequestTimeout</Code>") {
		t.Errorf("got %d %s, want 400 RequestTimeout", w.Code, w.Body)
	}
	if w.Header().Get("Connection") != "close" {
		t.Errorf("Connection %q, want close", w.Header().Get("Connection"))
	}
	got.Range(func(k, v any) bool {
		if strings.HasPrefix(v.(string), "10 bytes") {
			t.Errorf("the backend got the whole body of %s", k)
		}
		return true
	})
}

// held is one request the holding backend holds: arrived is closed when it
// reaches the backend, which answers as finish says once it is sent.
type held struct {
	arrived chan struct{}
	finish  chan string
}

// holdingBackend is a backend that holds each request (by its key) until
// the test sends how to end it: ok, error (500), drop (the connection is
// cut) or panic (answered; the client's writer panics).
func holdingBackend(t *testing.T) (*httptest.Server, func(name string) *held) {
	var mu sync.Mutex
	holds := map[string]*held{}
	hold := func(name string) *held {
		mu.Lock()
		defer mu.Unlock()
		if holds[name] == nil {
			holds[name] = &held{arrived: make(chan struct{}), finish: make(chan string, 1)}
		}
		return holds[name]
	}
	be := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := hold(strings.TrimPrefix(r.URL.Path, "/b/"))
		close(h.arrived)
		switch <-h.finish {
		case "ok":
			fmt.Fprint(w, "body")
		case "error":
			w.WriteHeader(http.StatusInternalServerError)
		case "drop":
			panic(http.ErrAbortHandler)
		default: // the client's answer panics
			fmt.Fprint(w, "body")
		}
	}))
	t.Cleanup(func() {
		// A failed test leaves requests held: let them go, or Close
		// would wait for them.
		mu.Lock()
		for _, h := range holds {
			select {
			case h.finish <- "ok":
			default:
			}
		}
		mu.Unlock()
		be.Close()
	})
	return be, hold
}

// TestRecorderReplacesAnswer: once the client was cut off, whatever
// answer a handler starts (a backend's error relayed, the proxy's own) is
// replaced by the cut-off's error, and the connection closed.
func TestRecorderReplacesAnswer(t *testing.T) {
	for _, tc := range []struct {
		code     int
		readFrom bool
	}{{http.StatusOK, false}, {http.StatusBadRequest, false}, {http.StatusServiceUnavailable, false}, {http.StatusOK, true}} {
		code := tc.code
		w := httptest.NewRecorder()
		cut := false
		rec := &responseRecorder{ResponseWriter: w, bodyUnread: func() bool { return true }, resource: "/b/k", id: "req-1",
			replace: func() error {
				if cut {
					return s3err.ErrRequestTimeout
				}
				return nil
			}}
		cut = true
		rec.Header().Set("Content-Length", "5")
		rec.WriteHeader(code)
		if tc.readFrom {
			// The pass-through's copy of a body that writes itself.
			rec.ReadFrom(strings.NewReader("other"))
		} else {
			rec.Write([]byte("other"))
		}
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "<Code>RequestTimeout</Code>") || strings.Contains(w.Body.String(), "other") {
			t.Errorf("answer %d: got %d %s, want 400 RequestTimeout alone", code, w.Code, w.Body)
		}
		if rec.status != http.StatusBadRequest || rec.bytes != int64(w.Body.Len()) {
			t.Errorf("answer %d: recorded %d, %d bytes; want 400 and %d bytes", code, rec.status, rec.bytes, w.Body.Len())
		}
		if w.Header().Get("Connection") != "close" || w.Header().Get("Content-Length") == "5" {
			t.Errorf("answer %d: headers %v", code, w.Header())
		}
	}
}
