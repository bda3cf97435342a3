//go:build integration

package gateway

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestDigestsBlobDeleteRacesReference holds a client's delete of an
// unreferenced blob on its way to MinIO, after the gateway checked that
// nothing references it, and meanwhile writes a manifest naming the blob.
// The manifest must be refused (SlowDown): had it been recorded, the
// delete would remove a blob a stored manifest names. Released, the
// delete goes through, its guard is released, and the blob can be
// uploaded and named again. Both DeleteObject and DeleteObjects.
func TestDigestsBlobDeleteRacesReference(t *testing.T) {
	e := newDigestEnv(t)
	cases := []struct {
		name   string
		delete func(key string) error
		match  func(harness.ProxiedRequest) bool
	}{
		{"DeleteObject", func(key string) error {
			_, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
			return err
		}, func(r harness.ProxiedRequest) bool { return r.Method == http.MethodDelete }},
		{"DeleteObjects", func(key string) error {
			out, err := e.alice.DeleteObjects(t.Context(), &s3.DeleteObjectsInput{
				Bucket: aws.String(regBucket),
				Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String(key)}}},
			})
			if err == nil && len(out.Errors) > 0 {
				t.Errorf("DeleteObjects errors %+v", out.Errors)
			}
			return err
		}, func(r harness.ProxiedRequest) bool { return r.Method == http.MethodPost && r.Query.Has("delete") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content := "raced blob of " + c.name
			d, key := blob(content)
			e.mustPut(e.alice, regBucket, key, []byte(content))
			held, release := make(chan struct{}), make(chan struct{})
			var once sync.Once
			in := e.proxy.Inject(harness.Rule{
				Match: func(r harness.ProxiedRequest) bool {
					ok := c.match(r)
					if ok {
						once.Do(func() { close(held) })
					}
					return ok
				},
				Fault: harness.HoldRequest, Times: 1, Until: release,
			})
			defer in.Remove()
			done := make(chan error, 1)
			go func() { done <- c.delete(key) }()
			select {
			case <-held:
			case err := <-done:
				t.Fatalf("the delete ended (%v) before it reached MinIO", err)
			case <-time.After(30 * time.Second):
				t.Fatal("the delete never reached MinIO")
			}
			manifestKey := sourcePrefix + "raced-" + c.name
			_, err := e.put(e.alice, regBucket, manifestKey, manifest(d))
			close(release)
			if derr := <-done; derr != nil {
				t.Fatalf("delete: %v", derr)
			}
			requireCode(t, err, http.StatusServiceUnavailable, "SlowDown")
			if e.onMinIO(regBucket, key) {
				t.Fatal("the blob was not deleted")
			}
			if e.onMinIO(regBucket, manifestKey) {
				t.Fatal("a manifest naming the blob being deleted was stored")
			}
			// The guard went with the delete's clear answer: the producer
			// uploads the blob again and names it.
			e.mustPut(e.alice, regBucket, key, []byte(content))
			e.mustPut(e.alice, regBucket, manifestKey, manifest(d))
			if n, err := e.store.Client().Get(t.Context(), e.store.Keys().Guard(d)); err != nil || n.Count != 0 {
				t.Fatalf("guard after the delete: %v, %v", n, err)
			}
		})
	}
}
