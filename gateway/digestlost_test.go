//go:build integration

package gateway

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestDigestsLostAnswers loses the backend's answers on the way to the
// gateway: the outcome is settled by looking at the backend, and no write
// stays pending.
func TestDigestsLostAnswers(t *testing.T) {
	e := newDigestEnv(t)
	d1, _ := blob("lost one")
	d2, _ := blob("lost two")
	match := func(method, key string) func(harness.ProxiedRequest) bool {
		return func(p harness.ProxiedRequest) bool {
			return p.Method == method && strings.HasSuffix(p.Path, "/"+regBucket+"/"+key) && !p.Query.Has("uploadId")
		}
	}

	t.Run("a PUT whose answer is lost is recorded as committed when the backend has it", func(t *testing.T) {
		key := sourcePrefix + "lost/put"
		in := e.proxy.Inject(harness.Rule{Match: match(http.MethodPut, key), Fault: harness.DropResponse, Times: 1})
		defer in.Remove()
		_, err := e.put(e.alice, regBucket, key, manifest(d1))
		requireCode(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
		if in.Hits() != 1 {
			t.Fatalf("fault applied %d times", in.Hits())
		}
		rec := e.requireRecord(regBucket, key, d1)
		if rec.Dirty || rec.ETag == "" {
			t.Fatalf("record %+v; want committed with the stored ETag", rec)
		}
	})

	t.Run("an overwrite the backend may or may not have keeps both bodies' digests", func(t *testing.T) {
		key := sourcePrefix + "lost/unknown"
		e.mustPut(e.alice, regBucket, key, manifest(d1))
		in := e.proxy.Inject(harness.Rule{Match: match(http.MethodPut, key), Fault: harness.CloseBeforeForward, Times: 1})
		defer in.Remove()
		_, err := e.put(e.alice, regBucket, key, manifest(d2))
		requireCode(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
		rec := e.record(regBucket, key)
		if rec == nil || rec.Pending != nil || !rec.Dirty || !slices.Equal(rec.Digests, []string{d1, d2}) && !slices.Equal(rec.Digests, []string{d2, d1}) {
			t.Fatalf("record %+v; want both bodies' digests, dirty, none pending", rec)
		}
	})

	t.Run("a DELETE whose answer is lost keeps the trash when the object is gone", func(t *testing.T) {
		key := sourcePrefix + "lost/delete"
		e.mustPut(e.alice, regBucket, key, manifest(d2))
		in := e.proxy.Inject(harness.Rule{Match: match(http.MethodDelete, key), Fault: harness.DropResponse, Times: 1})
		defer in.Remove()
		_, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		requireCode(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
		if e.onMinIO(regBucket, key) || e.record(regBucket, key) != nil {
			t.Fatal("the object stays, or its references stay recorded")
		}
		if trash, err := e.store.ListTrash(t.Context(), regBucket, key, 0); err != nil || len(trash) != 1 {
			t.Fatalf("trash %+v, %v; want one record", trash, err)
		}
	})

	t.Run("a DELETE that never reached the backend gets its references back", func(t *testing.T) {
		key := sourcePrefix + "lost/kept"
		e.mustPut(e.alice, regBucket, key, manifest(d1))
		in := e.proxy.Inject(harness.Rule{Match: match(http.MethodDelete, key), Fault: harness.CloseBeforeForward, Times: 1})
		defer in.Remove()
		_, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		requireCode(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
		if !e.onMinIO(regBucket, key) {
			t.Fatal("the object is gone")
		}
		rec := e.record(regBucket, key)
		if rec == nil || !slices.Equal(rec.Digests, []string{d1}) {
			t.Fatalf("record %+v; want the references back", rec)
		}
		if trash, err := e.store.ListTrash(t.Context(), regBucket, key, 0); err != nil || len(trash) != 0 {
			t.Fatalf("trash %+v, %v; want none", trash, err)
		}
	})
}
