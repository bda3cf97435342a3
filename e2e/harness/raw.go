package harness

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Payload hash values of x-amz-content-sha256 that are not a hex digest.
const (
	UnsignedPayload        = "UNSIGNED-PAYLOAD"
	StreamingSigned        = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	EmptySHA256            = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// newSigner returns a signer that signs like S3 clients do: the path is not
// escaped a second time. Each call gets a new one because a signer caches
// derived keys by access key and date but not by secret, so a shared one
// would sign a wrong-secret request with an earlier right secret's key.
func newSigner() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

// SignV4 signs req in its Authorization header for S3 with the given payload
// hash (a hex SHA-256 or one of the special values), setting
// x-amz-content-sha256 to it. The signing time is at, so a test can sign
// with a skewed clock. Headers set on req before the call are signed.
func SignV4(ctx context.Context, req *http.Request, accessKey, secretKey, region, payloadHash string, at time.Time) error {
	req.Header.Set("X-Amz-Content-Sha256", payloadHash)
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}
	if err := newSigner().SignHTTP(ctx, creds, req, payloadHash, "s3", region, at); err != nil {
		return fmt.Errorf("sign: %w", err)
	}
	return nil
}

// PresignV4 returns a presigned URL for req, valid for expires from at, with
// an unsigned payload, and the headers that must go with it.
func PresignV4(ctx context.Context, req *http.Request, accessKey, secretKey, region string, at time.Time, expires time.Duration) (string, http.Header, error) {
	q := req.URL.Query()
	q.Set("X-Amz-Expires", fmt.Sprint(int64(expires/time.Second)))
	req.URL.RawQuery = q.Encode()
	creds := aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey}
	u, h, err := newSigner().PresignHTTP(ctx, creds, req, UnsignedPayload, "s3", region, at)
	if err != nil {
		return "", nil, fmt.Errorf("presign: %w", err)
	}
	return u, h, nil
}

// S3Error is the XML error document of an S3 error response.
type S3Error struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource"`
	RequestID string   `xml:"RequestId"`
}

// ReadS3Error reads and closes resp's body and decodes it as an S3 error
// document. body is the raw text, for messages.
func ReadS3Error(resp *http.Response) (e S3Error, body string, err error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return e, string(b), fmt.Errorf("read error body: %w", err)
	}
	if err := xml.Unmarshal(b, &e); err != nil {
		return e, string(b), fmt.Errorf("error body is not S3 XML: %w", err)
	}
	return e, string(b), nil
}

// RecordedRequest is what a Recorder saw of one request.
type RecordedRequest struct {
	Method string
	Path   string
	Query  string
	Header http.Header
	Status int
}

// Recorder is an http.RoundTripper wrapper that records the requests a
// client sends, so a test can check that it exercised what it meant to (for
// example that a PUT was aws-chunked with a trailing checksum).
type Recorder struct {
	Next http.RoundTripper

	mu   sync.Mutex
	reqs []RecordedRequest
}

// Wrap sets the transport to record through, for WithTransport.
func (r *Recorder) Wrap(next http.RoundTripper) http.RoundTripper {
	r.Next = next
	return r
}

// RoundTrip implements http.RoundTripper.
func (r *Recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := RecordedRequest{Method: req.Method, Path: req.URL.Path, Query: req.URL.RawQuery, Header: req.Header.Clone()}
	resp, err := r.Next.RoundTrip(req)
	if resp != nil {
		rec.Status = resp.StatusCode
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, rec)
	r.mu.Unlock()
	return resp, err
}

// Requests returns the requests recorded so far.
func (r *Recorder) Requests() []RecordedRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]RecordedRequest(nil), r.reqs...)
}

// Find returns the recorded requests with the method whose path ends with
// suffix.
func (r *Recorder) Find(method, pathSuffix string) []RecordedRequest {
	var out []RecordedRequest
	for _, q := range r.Requests() {
		if q.Method == method && strings.HasSuffix(q.Path, pathSuffix) {
			out = append(out, q)
		}
	}
	return out
}
