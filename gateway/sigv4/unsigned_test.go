package sigv4

import (
	"net/http"
	"testing"
	"time"
)

// TestUnsignedBackendHeadersRefused checks that a backend's own control
// headers (MinIO's x-minio-*) must be signed like x-amz-* ones: added to a
// presigned URL or after a header signature, they are refused; signed, they
// pass.
func TestUnsignedBackendHeadersRefused(t *testing.T) {
	presigned := func(t *testing.T) *http.Request {
		r := newRequest(t, http.MethodDelete, s3URL(t, "b", "dir/a", ""), nil)
		return sdkPresign(t, r, time.Hour, testSecret, testRegion, testTime)
	}
	headerSigned := func(t *testing.T) *http.Request {
		r := newRequest(t, http.MethodDelete, s3URL(t, "b", "dir/a", ""), nil)
		sdkSign(t, r, emptySHA256, testAccessKey, testSecret, testRegion, testTime)
		return r
	}
	for _, name := range []string{"X-Minio-Force-Delete", "x-minio-source-mtime"} {
		for form, build := range map[string]func(*testing.T) *http.Request{"presigned": presigned, "header": headerSigned} {
			t.Run(form+" "+name, func(t *testing.T) {
				r := build(t)
				r.Header.Set(name, "true")
				_, err := testVerifier(testTime).Verify(r)
				wantErr(t, err, "AccessDenied", "x-minio-")
			})
		}
	}
	t.Run("signed", func(t *testing.T) {
		r := newRequest(t, http.MethodDelete, s3URL(t, "b", "dir/a", ""), nil)
		r.Header.Set("X-Minio-Force-Delete", "true")
		sdkSign(t, r, emptySHA256, testAccessKey, testSecret, testRegion, testTime)
		if _, err := testVerifier(testTime).Verify(r); err != nil {
			t.Fatalf("a signed x-minio-force-delete: %v", err)
		}
	})
	t.Run("other headers stay free", func(t *testing.T) {
		r := presigned(t)
		r.Header.Set("X-Minion", "1") // not the prefix
		r.Header.Set("Content-Type", "text/plain")
		if _, err := testVerifier(testTime).Verify(r); err != nil {
			t.Fatalf("unsigned headers outside x-amz-/x-minio-: %v", err)
		}
	})
}
