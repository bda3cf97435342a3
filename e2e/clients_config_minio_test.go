//go:build e2e

package e2e

// TestClientsConfig's minio-go calls.

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	"github.com/minio/minio-go/v7/pkg/tags"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// minioGoConfig drives minio-go: bucket tagging, versioning, policy and
// lifecycle set, read back and removed; object tagging, ACL and stat;
// listings with versions and a delimiter; RemoveObjects of every version;
// presigned GET and PUT.
func minioGoConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	ctx := t.Context()
	mc := e.MinioGo(t)
	bucket := harness.BucketName(t)
	if err := mc.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: e.Region}); err != nil {
		t.Fatalf("MakeBucket: %v", err)
	}
	if loc, err := mc.GetBucketLocation(ctx, bucket); err != nil || loc != e.Region {
		t.Fatalf("GetBucketLocation: %q %v, want %q", loc, err, e.Region)
	}

	minioGoBucketConfig(t, mc, direct, bucket)

	// Objects: two versions of one key, and two more keys.
	put := func(key string, d harness.Data) minio.UploadInfo {
		t.Helper()
		info, err := mc.PutObject(ctx, bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{
			ContentType: "application/x-minio-go", UserMetadata: map[string]string{"tool": "minio-go"}})
		if err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
		return info
	}
	v1 := put("mg/a.bin", harness.NewData(950, 333))
	second := harness.NewData(951, 444)
	v2 := put("mg/a.bin", second)
	put("mg/b.bin", harness.NewData(952, 55))
	put("mg/dir/c.bin", harness.NewData(953, 66))
	if v1.VersionID == "" || v2.VersionID == "" || v1.VersionID == v2.VersionID {
		t.Fatalf("PutObject in a versioned bucket: version ids %q and %q", v1.VersionID, v2.VersionID)
	}
	st, err := mc.StatObject(ctx, bucket, "mg/a.bin", minio.StatObjectOptions{})
	if err != nil || st.Size != second.Size || st.VersionID != v2.VersionID || st.ContentType != "application/x-minio-go" || st.UserMetadata["Tool"] != "minio-go" {
		t.Fatalf("StatObject mg/a.bin: %+v %v", st, err)
	}
	requireObjectMinioGo(t, mc, bucket, "mg/a.bin", second)

	// Object tagging and ACL.
	ot, err := tags.NewTags(map[string]string{"class": "cold"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.PutObjectTagging(ctx, bucket, "mg/a.bin", ot, minio.PutObjectTaggingOptions{}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	gotOT, err := mc.GetObjectTagging(ctx, bucket, "mg/a.bin", minio.GetObjectTaggingOptions{})
	if err != nil || !maps.Equal(gotOT.ToMap(), map[string]string{"class": "cold"}) {
		t.Fatalf("GetObjectTagging: %v %v", gotOT, err)
	}
	requireBackendObjectTags(t, direct, bucket, "mg/a.bin", map[string]string{"class": "cold"})
	if err := mc.RemoveObjectTagging(ctx, bucket, "mg/a.bin", minio.RemoveObjectTaggingOptions{}); err != nil {
		t.Fatalf("RemoveObjectTagging: %v", err)
	}
	if gotOT, err := mc.GetObjectTagging(ctx, bucket, "mg/a.bin", minio.GetObjectTaggingOptions{}); err != nil || gotOT.Count() != 0 {
		t.Fatalf("GetObjectTagging after RemoveObjectTagging: %v %v", gotOT, err)
	}
	aclInfo, err := mc.GetObjectACL(ctx, bucket, "mg/a.bin")
	if err != nil {
		t.Fatalf("GetObjectACL: %v", err)
	}
	if canned := aclInfo.Metadata.Get("X-Amz-Acl"); canned != "private" || len(aclInfo.Grant) != 1 || aclInfo.Grant[0].Permission != "FULL_CONTROL" {
		t.Fatalf("GetObjectACL: canned %q, grants %+v; want private", canned, aclInfo.Grant)
	}

	// Listings.
	var versions []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/", Recursive: true, WithVersions: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects with versions: %v", o.Err)
		}
		versions = append(versions, fmt.Sprintf("%s %s %d latest=%v", o.Key, o.VersionID, o.Size, o.IsLatest))
	}
	if len(versions) != 4 || versions[0] != fmt.Sprintf("mg/a.bin %s 444 latest=true", v2.VersionID) ||
		versions[1] != fmt.Sprintf("mg/a.bin %s 333 latest=false", v1.VersionID) {
		t.Fatalf("ListObjects with versions:\n%s", strings.Join(versions, "\n"))
	}
	var top []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/"}) {
		if o.Err != nil {
			t.Fatalf("ListObjects with a delimiter: %v", o.Err)
		}
		top = append(top, o.Key)
	}
	if want := []string{"mg/a.bin", "mg/b.bin", "mg/dir/"}; !slices.Equal(top, want) {
		t.Fatalf("ListObjects with a delimiter: %v, want %v", top, want)
	}
	var page []string
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: "mg/", Recursive: true, MaxKeys: 1, UseV1: true}) {
		if o.Err != nil {
			t.Fatalf("ListObjects (v1, one key a page): %v", o.Err)
		}
		page = append(page, o.Key)
	}
	if want := []string{"mg/a.bin", "mg/b.bin", "mg/dir/c.bin"}; !slices.Equal(page, want) {
		t.Fatalf("ListObjects (v1, one key a page): %v, want %v", page, want)
	}

	minioGoPresigned(t, e, mc, direct, bucket)
	minioGoRemoveAll(t, mc, direct, bucket)
}

// minioGoBucketConfig sets, reads back and removes bucket's tagging,
// versioning (left on for the objects), policy and lifecycle with
// minio-go, checking the backend where the client cannot show it.
func minioGoBucketConfig(t *testing.T, mc *minio.Client, direct *s3.Client, bucket string) {
	ctx := t.Context()
	code := func(err error) string { return minio.ToErrorResponse(err).Code }

	// Bucket tagging.
	wantTags := map[string]string{"team": "storage", "client": "minio-go"}
	bt, err := tags.NewTags(wantTags, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.SetBucketTagging(ctx, bucket, bt); err != nil {
		t.Fatalf("SetBucketTagging: %v", err)
	}
	got, err := mc.GetBucketTagging(ctx, bucket)
	if err != nil || !maps.Equal(got.ToMap(), wantTags) {
		t.Fatalf("GetBucketTagging: %v %v, want %v", got, err, wantTags)
	}
	requireBackendBucketTags(t, direct, bucket, wantTags)
	if err := mc.RemoveBucketTagging(ctx, bucket); err != nil {
		t.Fatalf("RemoveBucketTagging: %v", err)
	}
	if _, err := mc.GetBucketTagging(ctx, bucket); code(err) != "NoSuchTagSet" {
		t.Fatalf("GetBucketTagging after RemoveBucketTagging: %v, want NoSuchTagSet", err)
	}

	// Versioning: on, suspended, on again for the objects below.
	for _, step := range []struct {
		set  func(context.Context, string) error
		want string
	}{{mc.EnableVersioning, minio.Enabled}, {mc.SuspendVersioning, minio.Suspended}, {mc.EnableVersioning, minio.Enabled}} {
		if err := step.set(ctx, bucket); err != nil {
			t.Fatalf("setting versioning %s: %v", step.want, err)
		}
		v, err := mc.GetBucketVersioning(ctx, bucket)
		if err != nil || v.Status != step.want {
			t.Fatalf("GetBucketVersioning: %+v %v, want %s", v, err, step.want)
		}
	}
	requireBackendVersioning(t, direct, bucket, s3types.BucketVersioningStatusEnabled)

	// Policy.
	if err := mc.SetBucketPolicy(ctx, bucket, publicPolicy(bucket)); err != nil {
		t.Fatalf("SetBucketPolicy: %v", err)
	}
	doc, err := mc.GetBucketPolicy(ctx, bucket)
	if err != nil {
		t.Fatalf("GetBucketPolicy: %v", err)
	}
	requirePublicPolicy(t, doc, bucket)
	if err := mc.SetBucketPolicy(ctx, bucket, ""); err != nil {
		t.Fatalf("SetBucketPolicy with an empty policy (DeleteBucketPolicy): %v", err)
	}
	if doc, err := mc.GetBucketPolicy(ctx, bucket); err != nil || doc != "" {
		t.Fatalf("GetBucketPolicy after removing it: %q %v, want none", doc, err)
	}
	requireBackendPolicy(t, direct, bucket, false)

	// Lifecycle.
	lc := lifecycle.NewConfiguration()
	lc.Rules = []lifecycle.Rule{{
		ID:         "expire-tmp",
		Status:     "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: "tmp/"},
		Expiration: lifecycle.Expiration{Days: 5},
	}}
	if err := mc.SetBucketLifecycle(ctx, bucket, lc); err != nil {
		t.Fatalf("SetBucketLifecycle: %v", err)
	}
	backendLC, err := direct.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	if err != nil || len(backendLC.Rules) != 1 || aws.ToString(backendLC.Rules[0].ID) != "expire-tmp" {
		t.Fatalf("GetBucketLifecycleConfiguration on the backend after SetBucketLifecycle: %+v %v", backendLC, err)
	}
	// minio-go's GetBucketLifecycle always adds withUpdatedAt=true (MinIO
	// then also answers when the configuration was last changed). Its
	// failures are reported with Errorf, so that the calls after it run.
	gotLC, err := mc.GetBucketLifecycle(ctx, bucket)
	if err != nil || len(gotLC.Rules) != 1 || gotLC.Rules[0].ID != "expire-tmp" || gotLC.Rules[0].RuleFilter.Prefix != "tmp/" || gotLC.Rules[0].Expiration.Days != 5 {
		t.Errorf("GetBucketLifecycle: %+v %v", gotLC, err)
	}
	if err := mc.SetBucketLifecycle(ctx, bucket, lifecycle.NewConfiguration()); err != nil {
		t.Fatalf("SetBucketLifecycle with no rules (DeleteBucketLifecycle): %v", err)
	}
	requireBackendNoLifecycle(t, direct, bucket)
	if _, err := mc.GetBucketLifecycle(ctx, bucket); code(err) != "NoSuchLifecycleConfiguration" {
		t.Errorf("GetBucketLifecycle after removing it: %v, want NoSuchLifecycleConfiguration", err)
	}
}

// minioGoPresigned PUTs mg/presigned.bin into bucket through a URL
// minio-go presigned, and GETs it back through another.
func minioGoPresigned(t *testing.T, e *harness.Env, mc *minio.Client, direct *s3.Client, bucket string) {
	ctx := t.Context()
	hc := e.HTTPClient(t)
	presigned := harness.NewData(954, 3*kib)
	pu, err := mc.PresignedPutObject(ctx, bucket, "mg/presigned.bin", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, do(t, hc, newRequest(t, http.MethodPut, pu.String(), presigned.Bytes())), http.StatusOK)
	requireObject(t, direct, bucket, "mg/presigned.bin", presigned)
	gu, err := mc.PresignedGetObject(ctx, bucket, "mg/presigned.bin", 5*time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body := httpGetBody(t, hc, gu.String()); !bytes.Equal(body, presigned.Bytes()) {
		t.Fatalf("presigned GET returned %d bytes that differ", len(body))
	}
}

// minioGoRemoveAll removes every version of every key of bucket with
// RemoveObjects, in batches, and then the bucket.
func minioGoRemoveAll(t *testing.T, mc *minio.Client, direct *s3.Client, bucket string) {
	ctx := t.Context()
	objs := make(chan minio.ObjectInfo)
	go func() {
		defer close(objs)
		for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
			select {
			case objs <- o:
			case <-ctx.Done():
				return
			}
		}
	}()
	for rerr := range mc.RemoveObjects(ctx, bucket, objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("RemoveObjects %s %s: %v", rerr.ObjectName, rerr.VersionID, rerr.Err)
	}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
		t.Fatalf("after RemoveObjects of every version the bucket still lists %s %s (%v)", o.Key, o.VersionID, o.Err)
	}
	if err := mc.RemoveBucket(ctx, bucket); err != nil {
		t.Fatalf("RemoveBucket: %v", err)
	}
	requireNoBucket(t, direct, bucket)
}
