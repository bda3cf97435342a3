//go:build integration

package harness

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func TestMain(m *testing.M) {
	if os.Getenv(fakeGatewayEnv) == "1" {
		os.Exit(runFakeGateway())
	}
	Main(m)
}

func TestDataIsDeterministicAndSeekable(t *testing.T) {
	tests := []struct {
		name string
		size int64
	}{
		{"empty", 0},
		{"one byte", 1},
		{"one block", dataBlock},
		{"blocks and a bit", 3*dataBlock + 17},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewData(42, tc.size)
			all, err := io.ReadAll(d.Reader())
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(all)) != tc.size {
				t.Fatalf("read %d bytes, want %d", len(all), tc.size)
			}
			if !bytes.Equal(all, d.Bytes()) {
				t.Fatal("Read and ReadAt disagree")
			}
			if got, want := d.SHA256(), SHA256Hex(all); got != want {
				t.Fatalf("SHA256 %s, want %s", got, want)
			}
			for _, off := range []int64{0, 1, dataBlock - 1, dataBlock, tc.size - 1} {
				if off < 0 || off >= tc.size {
					continue
				}
				r := d.Reader()
				if _, err := r.Seek(off, io.SeekStart); err != nil {
					t.Fatal(err)
				}
				rest, err := io.ReadAll(r)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(rest, all[off:]) {
					t.Fatalf("after seeking to %d the bytes differ", off)
				}
				if !bytes.Equal(d.Range(off, 10), all[off:min(off+10, tc.size)]) {
					t.Fatalf("Range(%d, 10) differs", off)
				}
			}
		})
	}
	if bytes.Equal(NewData(1, 100).Bytes(), NewData(2, 100).Bytes()) {
		t.Fatal("different seeds give the same bytes")
	}
}

func TestMergeConfig(t *testing.T) {
	dst := map[string]any{"a": 1, "etcd": map[string]any{"prefix": "/x/", "embedded": map[string]any{"data_dir": "d"}}}
	mergeConfig(dst, map[string]any{"b": 2, "etcd": map[string]any{"prefix": "/y/"}})
	etcd := dst["etcd"].(map[string]any)
	if dst["a"] != 1 || dst["b"] != 2 || etcd["prefix"] != "/y/" || etcd["embedded"] == nil {
		t.Fatalf("merged: %v", dst)
	}
}

func TestBucketName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	for _, name := range []string{BucketName(t), BucketName(t)} {
		if !valid.MatchString(name) {
			t.Fatalf("invalid bucket name %q", name)
		}
	}
	if a, b := BucketName(t), BucketName(t); a == b {
		t.Fatalf("bucket names repeat: %s", a)
	}
}

func TestStartMinIO(t *testing.T) {
	m := StartMinIO(t)
	resp, err := http.Get(m.Endpoint + "/minio/health/live")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
	c := NewS3Client(m.Endpoint, m.Region, m.AccessKey, m.SecretKey, http.DefaultTransport, true)
	bucket := BucketName(t)
	if _, err := c.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	// Anonymous access must be refused by the backend too, or refusal
	// tests through the gateway would prove nothing.
	resp, err = http.Get(m.Endpoint + "/" + bucket + "/")
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := ReadS3Error(resp)
	if err != nil || e.Code != "AccessDenied" {
		t.Fatalf("anonymous list on MinIO: %s %+v %v", resp.Status, e, err)
	}
}

// TestSignV4UsesTheGivenSecret guards against the signer's derived-key
// cache, which keys on the access key but not the secret.
func TestSignV4UsesTheGivenSecret(t *testing.T) {
	at := time.Now()
	sign := func(secret string) string {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1:1/b/k", nil)
		if err := SignV4(t.Context(), req, "AKID", secret, "us-east-1", EmptySHA256, at); err != nil {
			t.Fatal(err)
		}
		return req.Header.Get("Authorization")
	}
	if sign("one") == sign("two") {
		t.Fatal("two secrets gave the same signature")
	}
}

// TestDataReaderConcurrentReadAt checks that ReadAt may be called in
// parallel, as minio-go does for multipart uploads.
func TestDataReaderConcurrentReadAt(t *testing.T) {
	d := NewData(9, 8*dataBlock)
	want := d.Bytes()
	r := d.Reader()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				p := make([]byte, dataBlock)
				if _, err := r.ReadAt(p, int64(i)*dataBlock); err != nil && err != io.EOF {
					t.Error(err)
					return
				}
				if !bytes.Equal(p, want[i*dataBlock:(i+1)*dataBlock]) {
					t.Error("concurrent ReadAt returned wrong bytes")
					return
				}
			}
		})
	}
	wg.Wait()
}
