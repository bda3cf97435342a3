//go:build e2e

package e2e

// Upload sessions driven by real clients: each one's multipart calls leave
// the records the gateway promises.

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestSessionsClients runs every multipart call through sweepgate with
// aws-sdk-go-v2, minio-go and the aws command-line client, and checks that
// the completed objects match byte for byte and that the sessions end
// completed with their parts recorded.
func TestSessionsClients(t *testing.T) {
	e := harness.Start(t)
	e.RequireGateway(t)
	store := newSessionStore(t, e)
	c := e.SDK(t)
	direct := e.DirectSDK(t)

	w := &clientsWorld{e: e, store: store, c: c, direct: direct}
	t.Run("aws-sdk-go-v2", w.sdk)
	t.Run("minio-go core", w.minioCore)
	t.Run("minio-go PutObject", w.minioPutObject)
	t.Run("aws cli", w.awsCLI)
}

// clientsWorld is what TestSessionsClients' clients share: the gateway,
// its sessions and a client of MinIO.
type clientsWorld struct {
	e      *harness.Env
	store  *sessionStore
	c      *s3.Client
	direct *s3.Client
}

// sdk drives an upload's whole life with aws-sdk-go-v2 and checks the
// session's records at each step.
func (w *clientsWorld) sdk(t *testing.T) {
	bucket := w.e.Bucket(t)
	key := "sdk/assembled"
	src := harness.NewData(3001, 7*mib)
	putData(t, w.c, bucket, "sdk/source", src)
	p1 := harness.NewData(3002, 5*mib)
	p2old := harness.NewData(3003, 5*mib)
	p2 := harness.NewData(3004, 5*mib)
	p4 := harness.NewData(3005, mib+13)
	const copyFrom, copyLen = mib + 7, 5 * mib

	uploadID := createUpload(t, w.c, bucket, key)
	if rec := w.store.requireState(t, bucket, uploadID, "active"); rec.Owner != w.e.AccessKey || rec.Key != key {
		t.Fatalf("new session: owner %q key %q, want %q %q", rec.Owner, rec.Key, w.e.AccessKey, key)
	}

	// Parts 1, 2 and 4 in parallel.
	done := make([]s3types.CompletedPart, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, p := range []struct {
		n int32
		d harness.Data
	}{{1, p1}, {2, p2old}, {4, p4}} {
		wg.Go(func() {
			out, err := uploadPart(t.Context(), w.c, bucket, key, uploadID, p.n, p.d.Section(0, p.d.Size))
			if err != nil {
				errs <- fmt.Errorf("part %d: %w", p.n, err)
				return
			}
			done[p.n-1] = s3types.CompletedPart{PartNumber: aws.Int32(p.n), ETag: out.ETag}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cp, err := w.c.UploadPartCopy(t.Context(), &s3.UploadPartCopyInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID), PartNumber: aws.Int32(3),
		CopySource:      aws.String(bucket + "/sdk/source"),
		CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", copyFrom, copyFrom+copyLen-1)),
	})
	if err != nil {
		t.Fatalf("UploadPartCopy: %v", err)
	}
	done[2] = s3types.CompletedPart{PartNumber: aws.Int32(3), ETag: cp.CopyPartResult.ETag}
	// Part 2 again, with other bytes: the later upload is the part.
	re := mustUploadPart(t, w.c, bucket, key, uploadID, 2, p2.Section(0, p2.Size))
	done[1] = s3types.CompletedPart{PartNumber: aws.Int32(2), ETag: re.ETag}
	if unquoteETag(aws.ToString(re.ETag)) == unquoteETag(aws.ToString(done[0].ETag)) {
		t.Fatal("test data: parts with equal ETags")
	}

	listed, err := w.c.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	if err != nil {
		t.Fatalf("ListParts: %v", err)
	}
	if len(listed.Parts) != 4 {
		t.Fatalf("ListParts: %d parts, want 4", len(listed.Parts))
	}
	for i, p := range listed.Parts {
		if aws.ToString(p.ETag) != aws.ToString(done[i].ETag) {
			t.Fatalf("ListParts part %d: ETag %s, want %s", i+1, aws.ToString(p.ETag), aws.ToString(done[i].ETag))
		}
	}
	uploads, err := w.c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(uploads.Uploads) != 1 || aws.ToString(uploads.Uploads[0].UploadId) != uploadID {
		t.Fatalf("ListMultipartUploads lists %d uploads, want just %s", len(uploads.Uploads), uploadID)
	}

	out, err := completeUpload(t.Context(), w.c, bucket, key, uploadID, done)
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	sum, size := concatSum(t, p1.Reader(), p2.Reader(), src.Section(copyFrom, copyLen), p4.Reader())
	requireObjectSum(t, w.c, bucket, key, sum, size)
	got := requireObjectSum(t, w.direct, bucket, key, sum, size)
	if unquoteETag(aws.ToString(got.ETag)) != unquoteETag(aws.ToString(out.ETag)) {
		t.Fatalf("object ETag %s, complete answered %s", aws.ToString(got.ETag), aws.ToString(out.ETag))
	}
	requireNoUploads(t, w.direct, bucket)

	requireCompletedSession(t, w.store, bucket, uploadID, aws.ToString(out.ETag))
	requireSDKPartRecords(t, w.store, bucket, uploadID, done, p1, p2, p4, copyLen)

	w.abortAnother(t, bucket, key, p1, sum, size)
}

// requireSDKPartRecords checks the part records of the sdk case's upload:
// done's ETags, the sizes of p1, p2, the copied range of copyLen bytes and
// p4, and the SHA-256 of the uploaded ones.
func requireSDKPartRecords(t *testing.T, store *sessionStore, bucket, uploadID string, done []s3types.CompletedPart, p1, p2, p4 harness.Data, copyLen int64) {
	t.Helper()
	parts := store.parts(t, bucket, uploadID)
	if len(parts) != 4 {
		t.Fatalf("recorded parts %v, want 1..4", slices.Sorted(maps.Keys(parts)))
	}
	want := []struct {
		size   int64
		sha256 string
	}{{p1.Size, p1.SHA256()}, {p2.Size, p2.SHA256()}, {copyLen, ""}, {p4.Size, p4.SHA256()}}
	for i, exp := range want {
		p := parts[i+1]
		if unquoteETag(p.ETag) != unquoteETag(aws.ToString(done[i].ETag)) || p.Size != exp.size {
			t.Errorf("part %d recorded as ETag %s size %d, want %s %d", i+1, p.ETag, p.Size, aws.ToString(done[i].ETag), exp.size)
		}
		if exp.sha256 != "" && p.SHA256 != exp.sha256 {
			t.Errorf("part %d recorded with SHA-256 %s, want %s", i+1, p.SHA256, exp.sha256)
		}
	}
}

// abortAnother uploads part 1 of p1 to a second upload of key and aborts
// it: its session ends aborted, and the object of key, with the SHA-256
// sum and size, stays untouched.
func (w *clientsWorld) abortAnother(t *testing.T, bucket, key string, p1 harness.Data, sum string, size int64) {
	c, store, direct := w.c, w.store, w.direct
	aborted := createUpload(t, c, bucket, key)
	mustUploadPart(t, c, bucket, key, aborted, 1, p1.Section(0, mib))
	if err := abortUpload(t.Context(), c, bucket, key, aborted); err != nil {
		t.Fatalf("AbortMultipartUpload: %v", err)
	}
	rec := store.requireState(t, bucket, aborted, "aborted")
	if _, ok := rec.transitioned("aborting", "aborted"); !ok {
		t.Fatalf("aborted session's history %s has no aborting->aborted step", rec.path())
	}
	requireUploadGone(t, direct, bucket, key, aborted)
	// The completed object is untouched by the abort of another upload
	// of its key.
	requireObjectSum(t, direct, bucket, key, sum, size)
}

// minioCore drives uploads with minio-go's core calls and checks the
// session's records.
func (w *clientsWorld) minioCore(t *testing.T) {
	bucket := w.e.Bucket(t)
	key := "core/assembled"
	core := minio.Core{Client: w.e.MinioGo(t)}
	src := harness.NewData(3101, 6*mib)
	if _, err := core.Client.PutObject(t.Context(), bucket, "core/source", src.Reader(), src.Size, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	p1 := harness.NewData(3102, 5*mib)
	p2old := harness.NewData(3103, 5*mib)
	p2 := harness.NewData(3104, 5*mib)
	p4 := harness.NewData(3105, 777)
	const copyFrom, copyLen = 3, 5 * mib

	uploadID, err := core.NewMultipartUpload(t.Context(), bucket, key, minio.PutObjectOptions{ContentType: "application/x-core"})
	if err != nil {
		t.Fatalf("NewMultipartUpload: %v", err)
	}
	parts := make([]minio.CompletePart, 4)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, p := range []struct {
		n int
		d harness.Data
	}{{1, p1}, {2, p2old}, {4, p4}} {
		wg.Go(func() {
			op, err := core.PutObjectPart(t.Context(), bucket, key, uploadID, p.n, p.d.Reader(), p.d.Size, minio.PutObjectPartOptions{})
			if err != nil {
				errs <- fmt.Errorf("part %d: %w", p.n, err)
				return
			}
			parts[p.n-1] = minio.CompletePart{PartNumber: p.n, ETag: op.ETag}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cp, err := core.CopyObjectPart(t.Context(), bucket, "core/source", bucket, key, uploadID, 3, copyFrom, copyLen, nil)
	if err != nil {
		t.Fatalf("CopyObjectPart: %v", err)
	}
	parts[2] = minio.CompletePart{PartNumber: 3, ETag: cp.ETag}
	op, err := core.PutObjectPart(t.Context(), bucket, key, uploadID, 2, p2.Reader(), p2.Size, minio.PutObjectPartOptions{})
	if err != nil {
		t.Fatalf("re-upload part 2: %v", err)
	}
	parts[1] = minio.CompletePart{PartNumber: 2, ETag: op.ETag}

	listed, err := core.ListObjectParts(t.Context(), bucket, key, uploadID, 0, 1000)
	if err != nil {
		t.Fatalf("ListObjectParts: %v", err)
	}
	if len(listed.ObjectParts) != 4 || unquoteETag(listed.ObjectParts[1].ETag) != unquoteETag(op.ETag) {
		t.Fatalf("ListObjectParts: %+v", listed.ObjectParts)
	}
	ups, err := core.ListMultipartUploads(t.Context(), bucket, "", "", "", "", 1000)
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	if len(ups.Uploads) != 1 || ups.Uploads[0].UploadID != uploadID {
		t.Fatalf("ListMultipartUploads: %+v", ups.Uploads)
	}
	info, err := core.CompleteMultipartUpload(t.Context(), bucket, key, uploadID, parts, minio.PutObjectOptions{})
	if err != nil {
		t.Fatalf("CompleteMultipartUpload: %v", err)
	}
	sum, size := concatSum(t, p1.Reader(), p2.Reader(), src.Section(copyFrom, copyLen), p4.Reader())
	requireObjectSum(t, w.direct, bucket, key, sum, size)
	requireObjectSum(t, w.c, bucket, key, sum, size)
	requireCompletedSession(t, w.store, bucket, uploadID, info.ETag)
	rec := w.store.parts(t, bucket, uploadID)
	if len(rec) != 4 || unquoteETag(rec[2].ETag) != unquoteETag(op.ETag) || rec[2].SHA256 != p2.SHA256() || rec[3].Size != copyLen {
		t.Fatalf("recorded parts: %+v", rec)
	}

	aborted, err := core.NewMultipartUpload(t.Context(), bucket, key, minio.PutObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := core.PutObjectPart(t.Context(), bucket, key, aborted, 1, p4.Reader(), p4.Size, minio.PutObjectPartOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := core.AbortMultipartUpload(t.Context(), bucket, key, aborted); err != nil {
		t.Fatalf("AbortMultipartUpload: %v", err)
	}
	w.store.requireState(t, bucket, aborted, "aborted")
	requireUploadGone(t, w.direct, bucket, key, aborted)
}

// minioPutObject uploads a large object with minio-go's PutObject, which
// goes multipart, and checks its session.
func (w *clientsWorld) minioPutObject(t *testing.T) {
	bucket := w.e.Bucket(t)
	key := "minio-go/parallel"
	mc := w.e.MinioGo(t)
	d := harness.NewData(3201, 17*mib+5)
	// A ReaderAt with NumThreads: minio-go uploads the parts in
	// parallel.
	info, err := mc.PutObject(t.Context(), bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{PartSize: 5 * mib, NumThreads: 4})
	if err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	requireObject(t, w.direct, bucket, key, d)
	sess := w.store.onlySession(t, bucket)
	requireCompletedSession(t, w.store, bucket, sess.UploadID, info.ETag)
	requireRecordedParts(t, w.store, bucket, sess.UploadID, d, 5*mib)
}

// awsCLI uploads with the aws CLI, which goes multipart, and checks the
// session.
func (w *clientsWorld) awsCLI(t *testing.T) {
	awsBin := requireCLI(t, "aws", "awscli")
	bucket := w.e.Bucket(t)
	cl := newCLI(t, awsBin)
	config := filepath.Join(cl.dir, "aws-config")
	// 5 MiB parts, several in flight at once.
	cfg := "[default]\nregion = " + w.e.Region + "\ns3 =\n    addressing_style = path\n    multipart_chunksize = 5MB\n    max_concurrent_requests = 4\n"
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cl.env = append(cl.env,
		"AWS_ACCESS_KEY_ID="+w.e.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+w.e.SecretKey,
		"AWS_DEFAULT_REGION="+w.e.Region,
		"AWS_CONFIG_FILE="+config,
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(cl.dir, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_PAGER=",
		"AWS_MAX_ATTEMPTS=1",
	)
	d := harness.NewData(3301, 20*mib)
	d.WriteFile(t, filepath.Join(cl.dir, "big.bin"))
	cl.run(t, "--endpoint-url", w.e.Endpoint, "s3", "cp", "big.bin", "s3://"+bucket+"/cli/big.bin")
	requireObject(t, w.direct, bucket, "cli/big.bin", d)
	head, err := w.direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("cli/big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	sess := w.store.onlySession(t, bucket)
	requireCompletedSession(t, w.store, bucket, sess.UploadID, aws.ToString(head.ETag))
	requireRecordedParts(t, w.store, bucket, sess.UploadID, d, 5*mib)
}

// requireRecordedParts checks that an upload of d in parts of partSize
// recorded each part with its size and SHA-256.
func requireRecordedParts(t *testing.T, s *sessionStore, bucket, uploadID string, d harness.Data, partSize int64) {
	t.Helper()
	parts := s.parts(t, bucket, uploadID)
	n := int((d.Size + partSize - 1) / partSize)
	if len(parts) != n {
		t.Fatalf("recorded parts %v, want 1..%d", slices.Sorted(maps.Keys(parts)), n)
	}
	for i := range n {
		off := int64(i) * partSize
		size := min(partSize, d.Size-off)
		sum, _, err := harness.HashReader(d.Section(off, size))
		if err != nil {
			t.Fatal(err)
		}
		if p := parts[i+1]; p.Size != size || p.SHA256 != sum || p.ETag == "" {
			t.Errorf("part %d recorded as %+v, want size %d sha256 %s", i+1, p, size, sum)
		}
	}
}
