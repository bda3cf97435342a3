//go:build integration

package gateway

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// stored is an object as MinIO holds it: what a write that must not touch
// it is compared against.
type stored struct {
	body         []byte
	etag         string
	versionID    string
	lastModified time.Time
}

// storedOnMinIO reads bucket/key on MinIO directly.
func (e *digestEnv) storedOnMinIO(key string) stored {
	e.t.Helper()
	obj, err := e.direct.GetObject(e.t.Context(), regBucket, key, minio.GetObjectOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer obj.Close()
	body, err := io.ReadAll(obj)
	if err != nil {
		e.t.Fatalf("read %s on MinIO: %v", key, err)
	}
	info, err := obj.Stat()
	if err != nil {
		e.t.Fatal(err)
	}
	return stored{body: body, etag: info.ETag, versionID: info.VersionID, lastModified: info.LastModified}
}

// requireStored checks that key on MinIO is still exactly was.
func (e *digestEnv) requireStored(key string, was stored) {
	e.t.Helper()
	now := e.storedOnMinIO(key)
	if !bytes.Equal(now.body, was.body) || now.etag != was.etag || now.versionID != was.versionID || !now.lastModified.Equal(was.lastModified) {
		e.t.Fatalf("%s on MinIO changed: now %q (ETag %s, version %q, modified %s), was %q (ETag %s, version %q, modified %s)",
			key, now.body, now.etag, now.versionID, now.lastModified, was.body, was.etag, was.versionID, was.lastModified)
	}
}

// referencedBlob stores content as a blob through the gateway and a
// manifest naming it, and returns the blob's key and what MinIO holds.
func (e *digestEnv) referencedBlob(content string) (key string, was stored) {
	e.t.Helper()
	d, key := blob(content)
	e.mustPut(e.alice, regBucket, key, []byte(content))
	e.mustPut(e.alice, regBucket, sourcePrefix+"refs/"+strings.TrimPrefix(d, "sha256:")[:12], manifest(d))
	// MinIO's modification times are in milliseconds: a rewrite in the
	// same millisecond would keep LastModified.
	time.Sleep(5 * time.Millisecond)
	return key, e.storedOnMinIO(key)
}

// upload creates an upload of key through the gateway with one part.
func (e *digestEnv) upload(key string, body []byte) (string, types.CompletedPart) {
	e.t.Helper()
	ctx := e.t.Context()
	created, err := e.alice.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
	if err != nil {
		e.t.Fatal(err)
	}
	part, err := e.alice.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(regBucket), Key: aws.String(key), UploadId: created.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(body),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return aws.ToString(created.UploadId), types.CompletedPart{ETag: part.ETag, PartNumber: aws.Int32(1)}
}

func (e *digestEnv) complete(key, id string, part types.CompletedPart, mods ...func(*s3.CompleteMultipartUploadInput)) (*s3.CompleteMultipartUploadOutput, error) {
	in := &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(regBucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{part}},
	}
	for _, m := range mods {
		m(in)
	}
	return e.alice.CompleteMultipartUpload(e.t.Context(), in)
}

func (e *digestEnv) copyObject(key, source string, mods ...func(*s3.CopyObjectInput)) (*s3.CopyObjectOutput, error) {
	in := &s3.CopyObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key), CopySource: aws.String(regBucket + "/" + source)}
	for _, m := range mods {
		m(in)
	}
	return e.alice.CopyObject(e.t.Context(), in)
}

// sessionState returns the state of an upload's session.
func (e *digestEnv) sessionState(id string) etcdstore.SessionState {
	e.t.Helper()
	v, err := e.store.GetSession(e.t.Context(), regBucket, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Value.State
}

// uploadOnMinIO reports whether MinIO still has upload id of key.
func (e *digestEnv) uploadOnMinIO(key, id string) bool {
	e.t.Helper()
	for u := range e.direct.ListIncompleteUploads(e.t.Context(), regBucket, key, false) {
		if u.Err != nil {
			e.t.Fatal(u.Err)
		}
		if u.UploadID == id {
			return true
		}
	}
	return false
}

// copiesSent returns the CopyObject requests onto key that reached MinIO.
func (e *digestEnv) copiesSent(key string) []harness.ProxiedRequest {
	return e.proxy.Find(func(p harness.ProxiedRequest) bool {
		return p.Method == http.MethodPut && strings.HasSuffix(p.Path, "/"+regBucket+"/"+key) && p.Header.Get("X-Amz-Copy-Source") != ""
	})
}

// unquoteETag returns an ETag without its quotes, as the digest service
// compares them.
func unquoteETag(s string) string { return strings.Trim(strings.TrimSpace(s), `"`) }

// TestWriteOnceBlobs: no write onto a blob's key replaces content that
// hashes to the key with content that does not, and no failed check
// deletes an object the gateway did not write.
func TestWriteOnceBlobs(t *testing.T) {
	e := newDigestEnv(t)

	t.Run("a PUT of the wrong content onto a referenced blob leaves it as it was", func(t *testing.T) {
		key, was := e.referencedBlob("put over me")
		_, err := e.put(e.alice, regBucket, key, []byte("wrong content"))
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		e.requireStored(key, was)
	})

	writeOnceCopies(t, e)
	writeOnceCompletes(t, e)
	writeOnceCompleteConditions(t, e)
}

// writeOnceCopies runs TestWriteOnceBlobs' subtests of CopyObject onto a
// blob's key: the copy is checked before it is sent and sent conditional
// on the bytes that were hashed.
func writeOnceCopies(t *testing.T, e *digestEnv) {
	t.Helper()
	t.Run("a CopyObject of the wrong content onto a referenced blob is refused before anything is sent", func(t *testing.T) {
		key, was := e.referencedBlob("copy over me")
		e.putDirect("staging/wrong", []byte("wrong content"))
		_, err := e.copyObject(key, "staging/wrong")
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		e.requireStored(key, was)
		if sent := e.copiesSent(key); len(sent) != 0 {
			t.Fatalf("%d copies onto the blob reached MinIO; want none", len(sent))
		}
	})

	t.Run("a CopyObject of the right content is sent conditional on the bytes that were hashed", func(t *testing.T) {
		content := "copied blob"
		_, key := blob(content)
		e.putDirect("staging/right", []byte(content))
		src := e.storedOnMinIO("staging/right")
		if _, err := e.copyObject(key, "staging/right"); err != nil {
			t.Fatal(err)
		}
		if got := e.storedOnMinIO(key); string(got.body) != content {
			t.Fatalf("copied blob holds %q, want %q", got.body, content)
		}
		sent := e.copiesSent(key)
		if len(sent) != 1 || unquoteETag(sent[0].Header.Get("X-Amz-Copy-Source-If-Match")) != src.etag {
			t.Fatalf("copies sent %+v; want one, conditional on the source's ETag %s", sent, src.etag)
		}
	})

	t.Run("a source replaced between the read and the copy makes the copy fail, not store other bytes", func(t *testing.T) {
		content := "raced blob"
		_, key := blob(content)
		e.putDirect("staging/raced", []byte(content))
		held, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		in := e.proxy.Inject(harness.Rule{
			Match: func(p harness.ProxiedRequest) bool {
				ok := p.Method == http.MethodPut && strings.HasSuffix(p.Path, "/"+regBucket+"/"+key) && p.Header.Get("X-Amz-Copy-Source") != ""
				if ok {
					once.Do(func() { close(held) })
				}
				return ok
			},
			Fault: harness.HoldRequest, Times: 1, Until: release,
		})
		defer in.Remove()
		done := make(chan error, 1)
		go func() {
			_, err := e.copyObject(key, "staging/raced")
			done <- err
		}()
		select {
		case <-held:
		case err := <-done:
			t.Fatalf("the copy ended (%v) before it reached MinIO", err)
		case <-time.After(30 * time.Second):
			t.Fatal("the copy never reached MinIO")
		}
		// The source was read and hashed; now it changes under the copy.
		e.putDirect("staging/raced", []byte("swapped content"))
		close(release)
		err := <-done
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		if e.onMinIO(regBucket, key) {
			t.Fatalf("the copy stored %q under the blob's key", e.storedOnMinIO(key).body)
		}
	})

	t.Run("a CopyObject honours the client's conditions on its source", func(t *testing.T) {
		content := "conditional copy"
		_, key := blob(content)
		e.putDirect("staging/conditional", []byte(content))
		src := e.storedOnMinIO("staging/conditional")
		_, err := e.copyObject(key, "staging/conditional", func(in *s3.CopyObjectInput) {
			in.CopySourceIfNoneMatch = aws.String(`"` + src.etag + `"`)
		})
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		_, err = e.copyObject(key, "staging/conditional", func(in *s3.CopyObjectInput) {
			in.CopySourceIfMatch = aws.String(`"0123456789abcdef0123456789abcdef"`)
		})
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		if e.onMinIO(regBucket, key) || len(e.copiesSent(key)) != 0 {
			t.Fatal("a copy whose source condition failed was sent")
		}
		if _, err := e.copyObject(key, "staging/conditional", func(in *s3.CopyObjectInput) {
			in.CopySourceIfMatch = aws.String(`"` + src.etag + `"`)
		}); err != nil {
			t.Fatal(err)
		}
		if got := e.storedOnMinIO(key); string(got.body) != content {
			t.Fatalf("copied blob holds %q, want %q", got.body, content)
		}
	})
}

// writeOnceCompletes runs TestWriteOnceBlobs' subtests of completing an
// upload onto a blob's key: a stored blob is left as it was, and content
// that does not hash to its key is not kept.
func writeOnceCompletes(t *testing.T, e *digestEnv) {
	t.Helper()
	t.Run("a complete of the wrong content onto a referenced blob leaves it, answers it, and aborts the upload", func(t *testing.T) {
		key, was := e.referencedBlob("complete over me")
		id, part := e.upload(key, []byte("wrong content"))
		out, err := e.complete(key, id, part)
		if err != nil {
			t.Fatal(err)
		}
		e.requireStored(key, was)
		if got := unquoteETag(aws.ToString(out.ETag)); got != was.etag || aws.ToString(out.Key) != key || aws.ToString(out.Bucket) != regBucket {
			t.Fatalf("complete answered %s/%s ETag %s; want the stored blob %s/%s ETag %s", aws.ToString(out.Bucket), aws.ToString(out.Key), got, regBucket, key, was.etag)
		}
		if e.uploadOnMinIO(key, id) {
			t.Fatal("the upload's parts linger on MinIO")
		}
		if s := e.sessionState(id); s != etcdstore.StateAborted {
			t.Fatalf("session %s, want aborted", s)
		}
	})

	t.Run("a complete of the right content onto a stored blob answers success without touching it", func(t *testing.T) {
		content := "complete me twice"
		key, was := e.referencedBlob(content)
		id, part := e.upload(key, []byte(content))
		out, err := e.complete(key, id, part)
		if err != nil {
			t.Fatal(err)
		}
		e.requireStored(key, was)
		if got := unquoteETag(aws.ToString(out.ETag)); got != was.etag {
			t.Fatalf("complete answered ETag %s, want the stored blob's %s", got, was.etag)
		}
		if e.uploadOnMinIO(key, id) || e.sessionState(id) != etcdstore.StateAborted {
			t.Fatal("the upload was not aborted through its session")
		}
	})

	t.Run("a complete of the wrong content onto a new key is deleted and answered BadDigest", func(t *testing.T) {
		_, key := blob("never stored")
		id, part := e.upload(key, []byte("wrong content"))
		_, err := e.complete(key, id, part)
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, key) {
			t.Fatal("a completed blob that does not match its digest stays on MinIO")
		}
		// A retry replays the recorded completion: the object it names is
		// gone, and the client must not hear that it is stored.
		_, err = e.complete(key, id, part)
		requireCode(t, err, http.StatusNotFound, "NoSuchKey")
	})

	t.Run("a complete onto an object written around the gateway that does not hash right changes nothing", func(t *testing.T) {
		content := "written around"
		_, key := blob(content)
		e.putDirect(key, []byte("not the content its key names"))
		was := e.storedOnMinIO(key)
		id, part := e.upload(key, []byte(content))
		_, err := e.complete(key, id, part)
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		if !strings.Contains(err.Error(), "around") {
			t.Fatalf("error %v does not say the object was written around the gateway", err)
		}
		e.requireStored(key, was)
		if !e.uploadOnMinIO(key, id) || e.sessionState(id) != etcdstore.StateActive {
			t.Fatal("the upload did not stay as it was")
		}
		if _, err := e.alice.AbortMultipartUpload(t.Context(), &s3.AbortMultipartUploadInput{
			Bucket: aws.String(regBucket), Key: aws.String(key), UploadId: aws.String(id),
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// writeOnceCompleteConditions runs TestWriteOnceBlobs' subtests of a
// complete carrying the client's own conditions.
func writeOnceCompleteConditions(t *testing.T, e *digestEnv) {
	t.Helper()
	t.Run("a complete with the client's own If-Match onto a blob is not sent", func(t *testing.T) {
		content := "if-match complete"
		key, was := e.referencedBlob(content)
		id, part := e.upload(key, []byte(content))
		_, err := e.complete(key, id, part, func(in *s3.CompleteMultipartUploadInput) { in.IfMatch = aws.String(`"` + was.etag + `"`) })
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		e.requireStored(key, was)
		if !e.uploadOnMinIO(key, id) || e.sessionState(id) != etcdstore.StateActive {
			t.Fatal("the upload did not stay as it was")
		}
	})

	t.Run("a complete refused on the client's own condition returns its session to active", func(t *testing.T) {
		key := "plain/conditional"
		e.putDirect(key, []byte("already here"))
		id, part := e.upload(key, []byte("new content"))
		_, err := e.complete(key, id, part, func(in *s3.CompleteMultipartUploadInput) { in.IfNoneMatch = aws.String("*") })
		requireCode(t, err, http.StatusPreconditionFailed, "PreconditionFailed")
		if s := e.sessionState(id); s != etcdstore.StateActive {
			t.Fatalf("session %s after a refused condition, want active", s)
		}
		if _, err := e.complete(key, id, part); err != nil {
			t.Fatalf("the upload did not take the next complete: %v", err)
		}
		if got := e.storedOnMinIO(key); string(got.body) != "new content" {
			t.Fatalf("object holds %q", got.body)
		}
	})
}

// TestWriteOnceVersioned runs the checks that name versions in a bucket
// with versioning on.
func TestWriteOnceVersioned(t *testing.T) {
	e := newDigestEnv(t)
	if err := e.direct.EnableVersioning(t.Context(), regBucket); err != nil {
		t.Fatal(err)
	}

	t.Run("a CopyObject copies the version the client names, verified", func(t *testing.T) {
		content := "versioned source"
		_, key := blob(content)
		e.putDirect("staging/versioned", []byte(content))
		old := e.storedOnMinIO("staging/versioned")
		e.putDirect("staging/versioned", []byte("a later version"))
		_, err := e.copyObject(key, "staging/versioned")
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, key) {
			t.Fatal("the latest version, which does not hash right, was copied")
		}
		if _, err := e.copyObject(key, "staging/versioned?versionId="+old.versionID); err != nil {
			t.Fatal(err)
		}
		if got := e.storedOnMinIO(key); string(got.body) != content {
			t.Fatalf("copied %q, want %q", got.body, content)
		}
	})

	t.Run("a completed blob that does not hash right is deleted by its version", func(t *testing.T) {
		_, key := blob("never stored, versioned")
		id, part := e.upload(key, []byte("wrong content"))
		_, err := e.complete(key, id, part)
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		for v := range e.direct.ListObjects(t.Context(), regBucket, minio.ListObjectsOptions{Prefix: key, WithVersions: true}) {
			if v.Err != nil {
				t.Fatal(v.Err)
			}
			t.Fatalf("version %s (delete marker %v) of %s left behind", v.VersionID, v.IsDeleteMarker, key)
		}
	})
}
