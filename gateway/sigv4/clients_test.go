package sigv4

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/minio/minio-go/v7"
	miniocreds "github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sweepgate/sweepgate/s3err"
)

// seen is what the test gateway recorded of one verified request.
type seen struct {
	method, path string
	mode         PayloadMode
	presigned    bool
	body         []byte
	err          error
}

// testGateway verifies every request with the real clock and answers like
// a minimal S3: PUT stores nothing but returns the MD5 ETag, GET returns a
// fixed body. Verification failures are answered as S3 XML errors.
type testGateway struct {
	t  *testing.T
	v  *Verifier
	mu sync.Mutex
	// requests in arrival order
	requests []seen
}

func (g *testGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := g.v.Verify(r)
	if err != nil {
		g.record(seen{method: r.Method, path: r.URL.Path, err: err})
		s3err.Write(w, err, r.URL.Path, "test")
		return
	}
	body, err := io.ReadAll(res.Payload.Body())
	g.record(seen{r.Method, r.URL.Path, res.Payload.Mode(), res.Presigned, body, err})
	if err != nil {
		s3err.Write(w, err, r.URL.Path, "test")
		return
	}
	switch r.Method {
	case http.MethodPut:
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.WriteHeader(http.StatusOK)
	case http.MethodGet:
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		_, _ = w.Write([]byte("object body"))
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func (g *testGateway) record(s seen) {
	g.mu.Lock()
	g.requests = append(g.requests, s)
	g.mu.Unlock()
}

func (g *testGateway) last(t *testing.T) seen {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.requests) == 0 {
		t.Fatal("the gateway saw no request")
	}
	return g.requests[len(g.requests)-1]
}

// startGateway starts the test gateway over HTTP or HTTPS: clients choose
// their payload modes by transport (signed streaming over HTTP, unsigned
// trailers over HTTPS).
func startGateway(t *testing.T, tls bool) (*testGateway, *httptest.Server) {
	t.Helper()
	g := &testGateway{t: t, v: &Verifier{
		Credentials: NewStaticCredentials(Credential{AccessKey: testAccessKey, SecretKey: testSecret, Principal: testPrincipal}),
		Region:      testRegion,
	}}
	srv := httptest.NewUnstartedServer(g)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return g, srv
}

func TestAWSSDKClient(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) { testAWSSDKClient(t, tls) })
	}
}

func testAWSSDKClient(t *testing.T, tls bool) {
	g, srv := startGateway(t, tls)
	client := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.URL),
		Region:       testRegion,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(testAccessKey, testSecret, ""),
		HTTPClient:   srv.Client(),
	})
	ctx := context.Background()
	data := testData(300 << 10)
	for _, key := range []string{"plain", "dir/with space+plus/ünï", "a//b/./c/../d"} {
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("bucket"), Key: aws.String(key), Body: bytes.NewReader(data),
		})
		if err != nil {
			t.Fatalf("PutObject %q: %v", key, err)
		}
		s := g.last(t)
		if s.err != nil || !bytes.Equal(s.body, data) || s.path != "/bucket/"+key {
			t.Fatalf("gateway saw %s %q mode %v, %d bytes, %v", s.method, s.path, s.mode, len(s.body), s.err)
		}
		t.Logf("aws-sdk-go-v2 PutObject: %v", s.mode)

		out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObject: %v", err)
		}
		out.Body.Close()
	}

	if tls {
		// A body that cannot be rewound is sent with a trailing checksum,
		// of known or unknown length.
		for _, length := range []*int64{aws.Int64(int64(len(data))), nil} {
			_, err := client.PutObject(ctx, &s3.PutObjectInput{
				Bucket: aws.String("bucket"), Key: aws.String("stream"), Body: io.MultiReader(bytes.NewReader(data)),
				ContentLength: length,
			})
			if err != nil {
				t.Fatalf("PutObject (unseekable): %v", err)
			}
			if s := g.last(t); s.err != nil || !bytes.Equal(s.body, data) {
				t.Fatalf("gateway saw mode %v, %d bytes, %v", s.mode, len(s.body), s.err)
			} else {
				t.Logf("aws-sdk-go-v2 PutObject of a stream: %v", s.mode)
			}
		}
	}

	presigner := s3.NewPresignClient(client)
	for _, method := range []string{http.MethodGet, http.MethodPut} {
		var url string
		var hdr http.Header
		if method == http.MethodGet {
			p, err := presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/pre signed")})
			if err != nil {
				t.Fatal(err)
			}
			url, hdr = p.URL, p.SignedHeader
		} else {
			p, err := presigner.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("dir/pre signed")})
			if err != nil {
				t.Fatal(err)
			}
			url, hdr = p.URL, p.SignedHeader
		}
		req, err := http.NewRequest(method, url, strings.NewReader(map[string]string{http.MethodPut: "uploaded"}[method]))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range hdr {
			if k != "Host" {
				req.Header[k] = v
			}
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if s := g.last(t); resp.StatusCode != http.StatusOK || s.err != nil || !s.presigned {
			t.Fatalf("presigned %s: status %d, %+v", method, resp.StatusCode, s)
		}
	}

	// The wrong secret is refused with S3's code, which the SDK surfaces.
	bad := s3.New(s3.Options{
		BaseEndpoint: aws.String(srv.URL), Region: testRegion, UsePathStyle: true, HTTPClient: srv.Client(),
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKey, "wrong", ""),
	})
	_, err := bad.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("k"), Body: bytes.NewReader(data)})
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("wrong secret: %v", err)
	}
}

func TestMinioGoClient(t *testing.T) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) { testMinioGoClient(t, tls) })
	}
}

func testMinioGoClient(t *testing.T, tls bool) {
	g, srv := startGateway(t, tls)
	client, err := minio.New(srv.Listener.Addr().String(), &minio.Options{
		Creds:           miniocreds.NewStaticV4(testAccessKey, testSecret, ""),
		Region:          testRegion,
		Secure:          tls,
		Transport:       srv.Client().Transport,
		TrailingHeaders: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	data := testData(200<<10 + 3)
	for _, opts := range []minio.PutObjectOptions{
		{},
		{SendContentMd5: true},
		{Checksum: minio.ChecksumCRC32C},
		{Checksum: minio.ChecksumSHA256},
		{Checksum: minio.ChecksumCRC64NVME},
		{DisableContentSha256: true},
	} {
		_, err := client.PutObject(ctx, "bucket", "dir/obj ünï+x", bytes.NewReader(data), int64(len(data)), opts)
		if err != nil {
			t.Fatalf("PutObject %+v: %v", opts, err)
		}
		s := g.last(t)
		if s.err != nil || !bytes.Equal(s.body, data) {
			t.Fatalf("gateway saw mode %v, %d bytes, %v", s.mode, len(s.body), s.err)
		}
		t.Logf("minio-go PutObject %+v: %v", opts.Checksum, s.mode)
	}
	obj, err := client.GetObject(ctx, "bucket", "dir/obj", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(obj); err != nil {
		t.Fatalf("GetObject: %v", err)
	}
	u, err := client.PresignedGetObject(ctx, "bucket", "dir/pre signed", time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if s := g.last(t); resp.StatusCode != http.StatusOK || !s.presigned || s.err != nil {
		t.Fatalf("presigned GET: %d %+v", resp.StatusCode, s)
	}
}
