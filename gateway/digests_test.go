//go:build integration

package gateway

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/s3op"
)

func TestDigestsReferenceWrites(t *testing.T) {
	e := newDigestEnv(t)
	d1, _ := blob("one")
	d2, _ := blob("two")
	d3, _ := blob("three")

	t.Run("a manifest PUT records its digests and an overwrite replaces them", func(t *testing.T) {
		key := sourcePrefix + "app/v1"
		etag := e.mustPut(e.alice, regBucket, key, manifest(d1, d2, d1))
		rec := e.requireRecord(regBucket, key, d1, d2)
		if rec.ETag != etag {
			t.Fatalf("recorded ETag %q, want the backend's %q", rec.ETag, etag)
		}
		// minio-go signs its body in STREAMING-AWS4-HMAC-SHA256-PAYLOAD chunks.
		body := manifest(d2, d3)
		if _, err := e.aliceMC.PutObject(t.Context(), regBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		e.requireRecord(regBucket, key, d2, d3)
		if n := e.count(e.store.Keys().Ref(d1, regBucket, key)); n != 0 {
			t.Fatalf("the overwritten body's reference to %s stays", d1)
		}
		got, err := e.direct.GetObject(t.Context(), regBucket, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer got.Close()
		if b, _ := io.ReadAll(got); !bytes.Equal(b, body) {
			t.Fatalf("MinIO holds %q, want %q", b, body)
		}
	})

	digestsRefusedWrites(t, e, d1, d3)
	digestsDeletesAndCopies(t, e, d1, d3)
}

// digestsRefusedWrites runs TestDigestsReferenceWrites' subtests of writes
// that are refused or fail: they leave no reference and do not reach MinIO
// (a guarded manifest goes through once its guard is gone).
func digestsRefusedWrites(t *testing.T, e *digestEnv, d1, d3 string) {
	t.Helper()
	t.Run("a body over the parse limit is refused and nothing is stored", func(t *testing.T) {
		key := sourcePrefix + "app/huge"
		body := append(manifest(d1), bytes.Repeat([]byte(" "), sourceLimit)...)
		_, err := e.put(e.alice, regBucket, key, body)
		requireCode(t, err, http.StatusBadRequest, "EntityTooLarge")
		if !strings.Contains(err.Error(), "parse limit") {
			t.Fatalf("error %v does not name the parse limit", err)
		}
		if e.record(regBucket, key) != nil || e.count(e.store.Keys().Refs(d1)) != 0 {
			t.Fatal("a refused body left references in etcd")
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("a refused body reached MinIO")
		}
	})

	t.Run("a body naming too many digests is refused", func(t *testing.T) {
		var ds []string
		for i := range cas.MaxDigestsPerObject + 1 {
			d, _ := blob(fmt.Sprint("layer", i))
			ds = append(ds, d)
		}
		key := sourcePrefix + "app/wide"
		_, err := e.put(e.alice, regBucket, key, manifest(ds...))
		requireCode(t, err, http.StatusBadRequest, "InvalidArgument")
		if e.record(regBucket, key) != nil || e.onMinIO(regBucket, key) {
			t.Fatal("a refused body was recorded or stored")
		}
	})

	t.Run("a manifest naming a guarded digest is refused until the guard is gone", func(t *testing.T) {
		key := sourcePrefix + "app/guarded"
		dg, _ := blob("guarded")
		e.guard(dg)
		before := e.guardRefusals(s3op.PutObject)
		_, err := e.put(e.alice, regBucket, key, manifest(d1, dg))
		requireCode(t, err, http.StatusServiceUnavailable, "SlowDown")
		if !strings.Contains(err.Error(), "being reclaimed") {
			t.Fatalf("error %v does not say why", err)
		}
		if e.record(regBucket, key) != nil || e.count(e.store.Keys().Refs(dg)) != 0 {
			t.Fatal("a refused manifest was recorded")
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("a refused manifest reached MinIO")
		}
		if got := e.guardRefusals(s3op.PutObject); got != before+1 {
			t.Fatalf("guard refusals = %v, want %v", got, before+1)
		}
		e.unguard(dg)
		e.mustPut(e.alice, regBucket, key, manifest(d1, dg))
		e.requireRecord(regBucket, key, d1, dg)
	})

	t.Run("a failed backend write leaves no references and no pending write", func(t *testing.T) {
		key := "manifests/nowhere"
		_, err := e.put(e.alice, missingBucket, key, manifest(d3))
		requireCode(t, err, http.StatusNotFound, "NoSuchBucket")
		if rec := e.record(missingBucket, key); rec != nil {
			t.Fatalf("a failed write left a record: %+v", rec)
		}
		if n := e.count(e.store.Keys().Ref(d3, missingBucket, key)); n != 0 {
			t.Fatal("a failed write left a reference")
		}
	})
}

// digestsDeletesAndCopies runs TestDigestsReferenceWrites' subtests of
// DELETE and CopyObject: references move to the trash and back, and a copy
// records the copied body's digests.
func digestsDeletesAndCopies(t *testing.T, e *digestEnv, d1, d3 string) {
	t.Helper()
	t.Run("a DELETE moves the references to the trash and a restore brings them back", func(t *testing.T) {
		key := sourcePrefix + "app/deleted"
		dd, _ := blob("deleted-only")
		e.mustPut(e.alice, regBucket, key, manifest(dd))
		if _, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("the manifest is still on MinIO")
		}
		if e.record(regBucket, key) != nil || e.count(e.store.Keys().Refs(dd)) != 0 {
			t.Fatal("the deleted manifest's references stay recorded")
		}
		trash, err := e.store.ListTrash(t.Context(), regBucket, key, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(trash) != 1 || !slices.Equal(trash[0].Digests, []string{dd}) || trash[0].Principal != alicePrincipal ||
			!trash[0].Expires.Equal(e.clock.Now().Add(24*time.Hour)) {
			t.Fatalf("trash = %+v; want one record of %s by alice, expiring after the window", trash, dd)
		}
		if ref, err := e.store.Referenced(t.Context(), dd, e.clock.Now()); err != nil || !ref {
			t.Fatalf("Referenced(%s) = %v, %v; the trash retains it", dd, ref, err)
		}
		if _, err := e.store.RestoreTrash(t.Context(), regBucket, key, trash[0].DeletedAt, e.clock.Now()); err != nil {
			t.Fatal(err)
		}
		e.requireRecord(regBucket, key, dd)
	})

	t.Run("a DELETE of an object with no record passes through", func(t *testing.T) {
		key := sourcePrefix + "app/unrecorded"
		e.putDirect(key, manifest(d1))
		if _, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("not deleted")
		}
	})

	t.Run("a CopyObject into a source records the copied body's digests", func(t *testing.T) {
		e.putDirect("staging/m", manifest(d1, d3))
		key := sourcePrefix + "app/copied"
		_, err := e.alice.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(regBucket), Key: aws.String(key), CopySource: aws.String(regBucket + "/staging/m"),
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := e.requireRecord(regBucket, key, d1, d3)
		info, err := e.direct.StatObject(t.Context(), regBucket, key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if rec.ETag != info.ETag {
			t.Fatalf("recorded ETag %q, MinIO has %q", rec.ETag, info.ETag)
		}
	})

	t.Run("a CopyObject of a source over the parse limit is refused", func(t *testing.T) {
		e.putDirect("staging/huge", bytes.Repeat([]byte("x"), sourceLimit+1))
		key := sourcePrefix + "app/copied-huge"
		_, err := e.alice.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(regBucket), Key: aws.String(key), CopySource: aws.String(regBucket + "/staging/huge"),
		})
		requireCode(t, err, http.StatusBadRequest, "EntityTooLarge")
		if e.record(regBucket, key) != nil || e.onMinIO(regBucket, key) {
			t.Fatal("a refused copy was recorded or stored")
		}
	})
}

func TestDigestsBlobs(t *testing.T) {
	e := newDigestEnv(t)

	t.Run("a verified blob with the wrong content is refused and not stored", func(t *testing.T) {
		_, key := blob("the right content")
		_, err := e.put(e.alice, regBucket, key, []byte("other content"))
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, key) {
			t.Fatal("a blob that does not match its digest reached MinIO")
		}
		// minio-go streams signed chunks; the check holds for them too.
		body := []byte("other content, streamed")
		_, err = e.aliceMC.PutObject(t.Context(), regBucket, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
		if code := minio.ToErrorResponse(err).Code; code != "BadDigest" {
			t.Fatalf("minio-go PUT: %v; want BadDigest", err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("a blob that does not match its digest reached MinIO")
		}
	})

	t.Run("a verified blob with the right content is stored and its placement ends", func(t *testing.T) {
		d, key := blob("the right content")
		e.mustPut(e.alice, regBucket, key, []byte("the right content"))
		if !e.onMinIO(regBucket, key) {
			t.Fatal("the blob is not on MinIO")
		}
		d2, key2 := blob("streamed right content")
		body := []byte("streamed right content")
		if _, err := e.aliceMC.PutObject(t.Context(), regBucket, key2, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
		if !e.onMinIO(regBucket, key2) {
			t.Fatal("the streamed blob is not on MinIO")
		}
		for _, d := range []string{d, d2} {
			e.requireWritten(d)
		}
	})

	t.Run("an empty blob is verified too", func(t *testing.T) {
		_, key := blob("")
		e.mustPut(e.alice, regBucket, key, nil)
		_, wrong := blob("not empty")
		_, err := e.put(e.alice, regBucket, wrong, nil)
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, wrong) {
			t.Fatal("an empty body stored under another digest")
		}
	})

	t.Run("a key in the namespace that carries no digest passes through", func(t *testing.T) {
		key := blobPrefix + "not-a-digest"
		e.mustPut(e.alice, regBucket, key, []byte("anything"))
		if !e.onMinIO(regBucket, key) {
			t.Fatal("not stored")
		}
	})

	digestsBlobReadsAndDeletes(t, e)

	t.Run("a CopyObject into a verified namespace is checked before the copy", func(t *testing.T) {
		e.putDirect("staging/blob", []byte("copied content"))
		_, wrong := blob("something else")
		_, err := e.alice.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(regBucket), Key: aws.String(wrong), CopySource: aws.String(regBucket + "/staging/blob"),
		})
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, wrong) {
			t.Fatal("a copied blob that does not match its digest stays on MinIO")
		}
		d, right := blob("copied content")
		if _, err := e.alice.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(regBucket), Key: aws.String(right), CopySource: aws.String(regBucket + "/staging/blob"),
		}); err != nil {
			t.Fatal(err)
		}
		if !e.onMinIO(regBucket, right) {
			t.Fatal("the right copy is not stored")
		}
		e.requireWritten(d)
	})
}

// digestsBlobReadsAndDeletes runs TestDigestsBlobs' subtests of reading a
// guarded blob and of deleting blobs, referenced or not.
func digestsBlobReadsAndDeletes(t *testing.T, e *digestEnv) {
	t.Helper()
	t.Run("a guarded blob reads as missing and refuses writes", func(t *testing.T) {
		content := "guarded blob"
		d, key := blob(content)
		e.mustPut(e.alice, regBucket, key, []byte(content))
		e.guard(d)
		_, err := e.alice.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		requireCode(t, err, http.StatusNotFound, "NotFound") // a HEAD answer has no body
		_, err = e.alice.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		requireCode(t, err, http.StatusNotFound, "NoSuchKey")
		before := e.guardRefusals(s3op.PutObject)
		_, err = e.put(e.alice, regBucket, key, []byte(content))
		requireCode(t, err, http.StatusServiceUnavailable, "SlowDown")
		if got := e.guardRefusals(s3op.PutObject); got != before+1 {
			t.Fatalf("guard refusals = %v, want %v", got, before+1)
		}
		e.unguard(d)
		out, err := e.alice.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if string(b) != content {
			t.Fatalf("GET = %q, want %q", b, content)
		}
	})

	t.Run("a referenced blob is deleted only by an admin", func(t *testing.T) {
		content := "referenced blob"
		d, key := blob(content)
		e.mustPut(e.alice, regBucket, key, []byte(content))
		e.mustPut(e.alice, regBucket, sourcePrefix+"uses-it", manifest(d))
		_, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		requireCode(t, err, http.StatusConflict, "BlobReferenced")
		if !strings.Contains(err.Error(), d) || !strings.Contains(err.Error(), "admin") {
			t.Fatalf("error %v does not name the digest and who may delete it", err)
		}
		if !e.onMinIO(regBucket, key) {
			t.Fatal("a refused delete removed the blob")
		}
		if _, err := e.admin.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("the admin's delete did not remove the blob")
		}
	})

	t.Run("an unreferenced blob is deleted by anyone", func(t *testing.T) {
		content := "unreferenced blob"
		_, key := blob(content)
		e.mustPut(e.alice, regBucket, key, []byte(content))
		if _, err := e.alice.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(regBucket), Key: aws.String(key)}); err != nil {
			t.Fatal(err)
		}
		if e.onMinIO(regBucket, key) {
			t.Fatal("not deleted")
		}
	})
}

func TestDigestsDeleteObjects(t *testing.T) {
	e := newDigestEnv(t)
	shared := "shared blob"
	dShared, sharedKey := blob(shared)
	dOnly, _ := blob("only in the deleted manifest")
	e.mustPut(e.alice, regBucket, sharedKey, []byte(shared))
	e.mustPut(e.alice, regBucket, sourcePrefix+"keeper", manifest(dShared))
	doomed := sourcePrefix + "doomed"
	e.mustPut(e.alice, regBucket, doomed, manifest(dOnly))
	e.putDirect("plain/key", []byte("plain"))

	for _, quiet := range []bool{false, true} {
		t.Run(fmt.Sprintf("quiet=%v", quiet), func(t *testing.T) {
			if quiet {
				e.mustPut(e.alice, regBucket, doomed, manifest(dOnly))
				e.putDirect("plain/key", []byte("plain"))
			}
			out, err := e.alice.DeleteObjects(t.Context(), &s3.DeleteObjectsInput{
				Bucket: aws.String(regBucket),
				Delete: &types.Delete{Quiet: aws.Bool(quiet), Objects: []types.ObjectIdentifier{
					{Key: aws.String(doomed)}, {Key: aws.String(sharedKey)}, {Key: aws.String("plain/key")},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			var deleted []string
			for _, d := range out.Deleted {
				deleted = append(deleted, aws.ToString(d.Key))
			}
			slices.Sort(deleted)
			want := []string{doomed, "plain/key"}
			if quiet {
				want = nil
			}
			if !slices.Equal(deleted, want) {
				t.Fatalf("deleted %v, want %v", deleted, want)
			}
			if len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != sharedKey || aws.ToString(out.Errors[0].Code) != "BlobReferenced" {
				t.Fatalf("errors %+v; want one BlobReferenced for %s", out.Errors, sharedKey)
			}
			if e.onMinIO(regBucket, doomed) || e.onMinIO(regBucket, "plain/key") || !e.onMinIO(regBucket, sharedKey) {
				t.Fatal("MinIO does not hold exactly the referenced blob")
			}
			if e.record(regBucket, doomed) != nil {
				t.Fatal("the deleted manifest's references stay recorded")
			}
			trash, err := e.store.ListTrash(t.Context(), regBucket, doomed, 0)
			if err != nil || len(trash) == 0 || !slices.Equal(trash[len(trash)-1].Digests, []string{dOnly}) {
				t.Fatalf("trash of %s = %+v, %v; want its digests", doomed, trash, err)
			}
			e.clock.mu.Lock()
			e.clock.now = e.clock.now.Add(time.Second) // a second delete gets its own trash record
			e.clock.mu.Unlock()
		})
	}

	t.Run("an admin deletes a referenced blob in a batch", func(t *testing.T) {
		out, err := e.admin.DeleteObjects(t.Context(), &s3.DeleteObjectsInput{
			Bucket: aws.String(regBucket),
			Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String(sharedKey)}}},
		})
		if err != nil || len(out.Errors) != 0 || len(out.Deleted) != 1 {
			t.Fatalf("DeleteObjects: %+v, %v", out, err)
		}
		if e.onMinIO(regBucket, sharedKey) {
			t.Fatal("not deleted")
		}
	})

	digestsDeleteObjectsBadDocuments(t, e, doomed, dOnly)

	t.Run("a bucket key outside the layout passes through", func(t *testing.T) {
		e.putDirect("plain/other", []byte("plain"))
		out, err := e.alice.DeleteObjects(t.Context(), &s3.DeleteObjectsInput{
			Bucket: aws.String(regBucket),
			Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("plain/other")}}},
		})
		if err != nil || len(out.Deleted) != 1 || e.onMinIO(regBucket, "plain/other") {
			t.Fatalf("DeleteObjects: %+v, %v", out, err)
		}
	})
}

// digestsDeleteObjectsBadDocuments runs TestDigestsDeleteObjects' subtests
// of documents the gateway cannot trust (malformed, or not matching their
// Content-MD5): doomed stays, with its record of dOnly.
func digestsDeleteObjectsBadDocuments(t *testing.T, e *digestEnv, doomed, dOnly string) {
	t.Helper()
	t.Run("a malformed document changes nothing", func(t *testing.T) {
		e.mustPut(e.alice, regBucket, doomed, manifest(dOnly))
		resp := e.raw(http.MethodPost, "/"+regBucket+"?delete", []byte("<Delete><Object><Key>"+doomed+"</Key>"))
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "<Code>MalformedXML</Code>") {
			t.Fatalf("%s %s; want 400 MalformedXML", resp.Status, b)
		}
		e.requireRecord(regBucket, doomed, dOnly)
		if !e.onMinIO(regBucket, doomed) {
			t.Fatal("a malformed request deleted an object")
		}
	})

	t.Run("a document whose Content-MD5 does not match changes nothing", func(t *testing.T) {
		doc := []byte(`<Delete><Object><Key>` + doomed + `</Key></Object></Delete>`)
		sum := md5.Sum([]byte("something else"))
		resp := e.raw(http.MethodPost, "/"+regBucket+"?delete", doc, "Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s; want 400 BadDigest", resp.Status)
		}
		e.requireRecord(regBucket, doomed, dOnly)
	})
}

func TestDigestsMultipartComplete(t *testing.T) {
	e := newDigestEnv(t)
	d1, _ := blob("mp one")
	d2, _ := blob("mp two")

	upload := func(key string, body []byte) (string, types.CompletedPart) {
		t.Helper()
		ctx := t.Context()
		created, err := e.alice.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(regBucket), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		part, err := e.alice.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(regBucket), Key: aws.String(key), UploadId: created.UploadId,
			PartNumber: aws.Int32(1), Body: bytes.NewReader(body),
		})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(created.UploadId), types.CompletedPart{ETag: part.ETag, PartNumber: aws.Int32(1)}
	}
	complete := func(key, id string, part types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
		return e.alice.CompleteMultipartUpload(t.Context(), &s3.CompleteMultipartUploadInput{
			Bucket: aws.String(regBucket), Key: aws.String(key), UploadId: aws.String(id),
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{part}},
		})
	}

	t.Run("a complete into a source records the assembled object's digests", func(t *testing.T) {
		key := sourcePrefix + "mp/ok"
		id, part := upload(key, manifest(d1, d2))
		out, err := complete(key, id, part)
		if err != nil {
			t.Fatal(err)
		}
		rec := e.requireRecord(regBucket, key, d1, d2)
		if want := strings.Trim(aws.ToString(out.ETag), `"`); rec.ETag != want {
			t.Fatalf("recorded ETag %q, want %q", rec.ETag, want)
		}
		if n := e.count(e.store.Keys().RefHolds()); n != 0 {
			t.Fatalf("%d reference holds left after the complete", n)
		}
	})

	t.Run("a complete while a guard is armed is refused and changes nothing", func(t *testing.T) {
		key := sourcePrefix + "mp/guarded"
		id, part := upload(key, manifest(d1))
		dg, _ := blob("some guarded digest")
		e.guard(dg)
		before := e.guardRefusals(s3op.CompleteMultipartUpload)
		_, err := complete(key, id, part)
		requireCode(t, err, http.StatusServiceUnavailable, "SlowDown")
		if e.onMinIO(regBucket, key) || e.record(regBucket, key) != nil {
			t.Fatal("a refused complete stored or recorded the object")
		}
		if got := e.guardRefusals(s3op.CompleteMultipartUpload); got != before+1 {
			t.Fatalf("guard refusals = %v, want %v", got, before+1)
		}
		e.unguard(dg)
		if _, err := complete(key, id, part); err != nil {
			t.Fatal(err)
		}
		e.requireRecord(regBucket, key, d1)
	})

	t.Run("a complete of parts over the parse limit is refused", func(t *testing.T) {
		key := sourcePrefix + "mp/huge"
		id, part := upload(key, bytes.Repeat([]byte("x"), sourceLimit+1))
		_, err := complete(key, id, part)
		requireCode(t, err, http.StatusBadRequest, "EntityTooLarge")
		if e.onMinIO(regBucket, key) {
			t.Fatal("a refused complete stored the object")
		}
	})

	t.Run("a complete of a blob is placed and verified", func(t *testing.T) {
		content := []byte("multipart blob")
		d, key := blob(string(content))
		id, part := upload(key, content)
		if _, err := complete(key, id, part); err != nil {
			t.Fatal(err)
		}
		if !e.onMinIO(regBucket, key) {
			t.Fatal("the blob is not stored")
		}
		e.requireWritten(d)
		_, wrong := blob("not this")
		id, part = upload(wrong, content)
		_, err := complete(wrong, id, part)
		requireCode(t, err, http.StatusBadRequest, "BadDigest")
		if e.onMinIO(regBucket, wrong) {
			t.Fatal("a completed blob that does not match its digest stays on MinIO")
		}
	})
}
