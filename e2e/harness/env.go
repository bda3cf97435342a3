package harness

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"
)

// Env is a MinIO with a sweepgate in front of it, and the means to talk to
// both.
type Env struct {
	MinIO *MinIO
	// Gateway is nil in direct mode (SWEEPGATE_E2E_TARGET=minio).
	Gateway *Gateway
	// Endpoint is where the clients of SDK and MinioGo point: the gateway's
	// plain-HTTP listener (MinIO's endpoint in direct mode).
	Endpoint string
	// TLSEndpoint is where the clients of TLSSDK and TLSMinioGo point: the
	// gateway's TLS listener (in direct mode, a TLS pass-through proxy to
	// MinIO that keeps the Host header, so signatures still match).
	TLSEndpoint string
	// TLSConfig trusts the certificate of TLSEndpoint.
	TLSConfig *tls.Config
	// AccessKey and SecretKey are the credentials the clients use by
	// default: the backend's own, which the gateway accepts by default, or
	// the first of Options.Credentials when the backend's are rejected.
	AccessKey string
	SecretKey string
	// Region is the region clients sign for.
	Region string
}

// Start starts a MinIO and a sweepgate in front of it, configured by opts
// (at most one; none means the default set-up). In direct mode
// (SWEEPGATE_E2E_TARGET=minio) no gateway runs and the clients talk to MinIO.
func Start(t testing.TB, opts ...Options) *Env {
	t.Helper()
	var o Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		t.Fatalf("harness: Start takes at most one Options")
	}
	if DirectMode() {
		// MinIO answers virtual-hosted-style requests itself only when told
		// its domain.
		m := StartMinIO(t, "MINIO_DOMAIN=localhost")
		tlsEndpoint, tlsCfg := startTLSProxy(t, m.Endpoint)
		return &Env{MinIO: m, Endpoint: m.Endpoint, TLSEndpoint: tlsEndpoint, TLSConfig: tlsCfg,
			AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region}
	}
	m := StartMinIO(t)
	g := StartGateway(t, m, o)
	e := &Env{MinIO: m, Gateway: g, Endpoint: g.Endpoint, TLSEndpoint: g.TLSEndpoint, TLSConfig: g.TLSConfig(),
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region}
	if o.RejectBackendCredentials && len(o.Credentials) > 0 {
		e.AccessKey, e.SecretKey = o.Credentials[0].AccessKey, o.Credentials[0].SecretKey
	}
	return e
}

// RequireGateway skips a test that only makes sense with a gateway when
// running in direct mode.
func (e *Env) RequireGateway(t testing.TB) {
	t.Helper()
	if e.Gateway == nil {
		t.Skip("direct mode (SWEEPGATE_E2E_TARGET=minio): this test needs the gateway")
	}
}

// ClientOption adjusts a client made by Env.
type ClientOption func(*clientConfig)

type clientConfig struct {
	accessKey, secretKey string
	wrap                 func(http.RoundTripper) http.RoundTripper
	s3Opts               []func(*s3.Options)
}

// WithCredentials makes the client sign with other credentials.
func WithCredentials(accessKey, secretKey string) ClientOption {
	return func(c *clientConfig) { c.accessKey, c.secretKey = accessKey, secretKey }
}

// WithTransport wraps the client's HTTP transport, for example with a
// Recorder.
func WithTransport(wrap func(http.RoundTripper) http.RoundTripper) ClientOption {
	return func(c *clientConfig) { c.wrap = wrap }
}

// WithS3Options adjusts an aws-sdk-go-v2 client's options.
func WithS3Options(fn func(*s3.Options)) ClientOption {
	return func(c *clientConfig) { c.s3Opts = append(c.s3Opts, fn) }
}

func (e *Env) config(accessKey, secretKey string, opts []ClientOption) clientConfig {
	c := clientConfig{accessKey: accessKey, secretKey: secretKey}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// transport returns a fresh HTTP transport that is closed at cleanup. dial,
// when set, replaces the destination of every connection.
func transport(t testing.TB, c clientConfig, tlsCfg *tls.Config, dial string) http.RoundTripper {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	if dial != "" {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, dial)
		}
	}
	t.Cleanup(tr.CloseIdleConnections)
	if c.wrap != nil {
		return c.wrap(tr)
	}
	return tr
}

// NewS3Client returns an aws-sdk-go-v2 S3 client for endpoint with static
// credentials, no retries (a retry would hide a failure) and otherwise the
// SDK's defaults, including its default checksum behaviour.
func NewS3Client(endpoint, region, accessKey, secretKey string, rt http.RoundTripper, pathStyle bool, optFns ...func(*s3.Options)) *s3.Client {
	opts := s3.Options{
		BaseEndpoint:     aws.String(endpoint),
		Region:           region,
		UsePathStyle:     pathStyle,
		Credentials:      credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient:       &http.Client{Transport: rt},
		RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig sets, and so what applications
		// get; s3.New alone would leave checksums off.
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
		// GETs of multipart objects have no whole-object checksum; the SDK
		// would log that for every such GET.
		DisableLogOutputChecksumValidationSkipped: true,
	}
	return s3.New(opts, optFns...)
}

// SDK returns an aws-sdk-go-v2 client that talks path-style to the gateway's
// plain-HTTP listener.
func (e *Env) SDK(t testing.TB, opts ...ClientOption) *s3.Client {
	c := e.config(e.AccessKey, e.SecretKey, opts)
	return NewS3Client(e.Endpoint, e.Region, c.accessKey, c.secretKey, transport(t, c, nil, ""), true, c.s3Opts...)
}

// TLSSDK returns an aws-sdk-go-v2 client that talks path-style to the
// gateway's TLS listener with the SDK's default checksum behaviour (over TLS
// its PUTs are aws-chunked with an unsigned trailing checksum).
func (e *Env) TLSSDK(t testing.TB, opts ...ClientOption) *s3.Client {
	c := e.config(e.AccessKey, e.SecretKey, opts)
	return NewS3Client(e.TLSEndpoint, e.Region, c.accessKey, c.secretKey, transport(t, c, e.TLSConfig, ""), true, c.s3Opts...)
}

// VirtualHostSDK returns an aws-sdk-go-v2 client that addresses buckets
// virtual-hosted-style, as BUCKET.localhost:PORT, with every connection
// going to the gateway's plain-HTTP listener.
func (e *Env) VirtualHostSDK(t testing.TB, opts ...ClientOption) *s3.Client {
	c := e.config(e.AccessKey, e.SecretKey, opts)
	u, err := url.Parse(e.Endpoint)
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	endpoint := "http://localhost:" + u.Port()
	return NewS3Client(endpoint, e.Region, c.accessKey, c.secretKey, transport(t, c, nil, u.Host), false, c.s3Opts...)
}

// DirectSDK returns an aws-sdk-go-v2 client that talks to MinIO itself, to
// check the backend's state.
func (e *Env) DirectSDK(t testing.TB, opts ...ClientOption) *s3.Client {
	c := e.config(e.MinIO.AccessKey, e.MinIO.SecretKey, opts)
	return NewS3Client(e.MinIO.Endpoint, e.MinIO.Region, c.accessKey, c.secretKey, transport(t, c, nil, ""), true, c.s3Opts...)
}

// NewMinioGo returns a minio-go client for endpoint (http:// or https://),
// addressing buckets path-style.
func NewMinioGo(endpoint, region, accessKey, secretKey string, rt http.RoundTripper) (*minio.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	return minio.New(u.Host, &minio.Options{
		Creds:        miniocreds.NewStaticV4(accessKey, secretKey, ""),
		Secure:       u.Scheme == "https",
		Region:       region,
		BucketLookup: minio.BucketLookupPath,
		Transport:    rt,
	})
}

func (e *Env) minioGo(t testing.TB, endpoint, region string, c clientConfig, tlsCfg *tls.Config) *minio.Client {
	t.Helper()
	mc, err := NewMinioGo(endpoint, region, c.accessKey, c.secretKey, transport(t, c, tlsCfg, ""))
	if err != nil {
		t.Fatalf("harness: minio-go client: %v", err)
	}
	return mc
}

// MinioGo returns a minio-go client that talks to the gateway over plain
// HTTP, where minio-go signs PUT bodies as STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// chunks.
func (e *Env) MinioGo(t testing.TB, opts ...ClientOption) *minio.Client {
	t.Helper()
	return e.minioGo(t, e.Endpoint, e.Region, e.config(e.AccessKey, e.SecretKey, opts), nil)
}

// TLSMinioGo returns a minio-go client that talks to the gateway's TLS
// listener.
func (e *Env) TLSMinioGo(t testing.TB, opts ...ClientOption) *minio.Client {
	t.Helper()
	return e.minioGo(t, e.TLSEndpoint, e.Region, e.config(e.AccessKey, e.SecretKey, opts), e.TLSConfig)
}

// DirectMinioGo returns a minio-go client that talks to MinIO itself.
func (e *Env) DirectMinioGo(t testing.TB, opts ...ClientOption) *minio.Client {
	t.Helper()
	return e.minioGo(t, e.MinIO.Endpoint, e.MinIO.Region, e.config(e.MinIO.AccessKey, e.MinIO.SecretKey, opts), nil)
}

// HTTPClient returns an HTTP client for raw requests to the gateway, over
// plain HTTP or TLS.
func (e *Env) HTTPClient(t testing.TB) *http.Client {
	return &http.Client{Transport: transport(t, clientConfig{}, e.TLSConfig, "")}
}

// Bucket creates a bucket with a unique name directly on MinIO and returns
// its name.
func (e *Env) Bucket(t testing.TB) string {
	t.Helper()
	name := BucketName(t)
	if _, err := e.DirectSDK(t).CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("harness: create bucket %s on MinIO: %v", name, err)
	}
	return name
}

// BucketName returns a unique valid bucket name derived from the test's
// name. In shard mode it is the next of the names reserved for the test,
// which every gateway of its has pinned on a shard (see ShardCount).
func BucketName(t testing.TB) string {
	if n := ShardCount(); n > 0 {
		if name, ok := reserve(t, n).take(); ok {
			return name
		}
	}
	return bucketName(t)
}

func bucketName(t testing.TB) string {
	var b strings.Builder
	dash := true
	for _, r := range strings.ToLower(t.Name()) {
		if b.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash:
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-") + "-" + randomHex(t, 4)
}
