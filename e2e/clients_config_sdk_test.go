//go:build e2e

package e2e

// TestClientsConfig's aws-sdk-go-v2 calls.

import (
	"bytes"
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

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// sdkConfig drives aws-sdk-go-v2's s3.Client through the same families:
// bucket tagging, versioning, lifecycle, policy (and its status), ACL and
// location; object tagging, ACL, attributes; ListObjects, ListObjectsV2
// and ListObjectVersions; DeleteObjects; presigned GET and PUT.
func sdkConfig(t *testing.T, e *harness.Env, direct *s3.Client) {
	ctx := t.Context()
	c := e.SDK(t)
	bucket := harness.BucketName(t)
	b := aws.String(bucket)
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: b}); err != nil {
		t.Fatalf("HeadBucket: %v", err)
	}
	if loc, err := c.GetBucketLocation(ctx, &s3.GetBucketLocationInput{Bucket: b}); err != nil ||
		(loc.LocationConstraint != "" && string(loc.LocationConstraint) != e.Region) {
		t.Fatalf("GetBucketLocation: %+v %v", loc, err)
	}

	sdkBucketConfig(t, c, bucket)

	// Objects.
	first, second := harness.NewData(960, 400), harness.NewData(961, 800)
	v1 := putData(t, c, bucket, "sdk/a.bin", first)
	v2 := putData(t, c, bucket, "sdk/a.bin", second)
	putData(t, c, bucket, "sdk/b.bin", harness.NewData(962, 10))
	putData(t, c, bucket, "sdk/dir/c.bin", harness.NewData(963, 20))
	if aws.ToString(v1.VersionId) == "" || aws.ToString(v1.VersionId) == aws.ToString(v2.VersionId) {
		t.Fatalf("PutObject in a versioned bucket: version ids %q and %q", aws.ToString(v1.VersionId), aws.ToString(v2.VersionId))
	}
	key := aws.String("sdk/a.bin")
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: b, Key: key}); err != nil || aws.ToInt64(h.ContentLength) != second.Size ||
		aws.ToString(h.VersionId) != aws.ToString(v2.VersionId) {
		t.Fatalf("HeadObject: %+v %v", h, err)
	}

	sdkObjectConfig(t, c, direct, bucket, v1, first.Size)

	// Listings.
	l2, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("sdk/"), Delimiter: aws.String("/")})
	if err != nil {
		t.Fatalf("ListObjectsV2: %v", err)
	}
	var got []string
	for _, o := range l2.Contents {
		got = append(got, aws.ToString(o.Key))
	}
	for _, p := range l2.CommonPrefixes {
		got = append(got, aws.ToString(p.Prefix))
	}
	if want := []string{"sdk/a.bin", "sdk/b.bin", "sdk/dir/"}; !slices.Equal(got, want) {
		t.Fatalf("ListObjectsV2 with a delimiter: %v, want %v", got, want)
	}
	got = nil
	pager := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("sdk/"), MaxKeys: aws.Int32(1)})
	pages := 0
	for pager.HasMorePages() {
		p, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListObjectsV2 page %d: %v", pages+1, err)
		}
		pages++
		if len(p.Contents) > 1 {
			t.Fatalf("ListObjectsV2 with MaxKeys 1: page %d has %d keys", pages, len(p.Contents))
		}
		for _, o := range p.Contents {
			got = append(got, aws.ToString(o.Key))
		}
	}
	// MinIO may answer the last key as truncated and then an empty page.
	if want := []string{"sdk/a.bin", "sdk/b.bin", "sdk/dir/c.bin"}; !slices.Equal(got, want) || pages < 3 {
		t.Fatalf("ListObjectsV2 one key a page: %v in %d pages, want %v one a page", got, pages, want)
	}
	l1, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: b, Prefix: aws.String("sdk/"), Marker: aws.String("sdk/a.bin"), MaxKeys: aws.Int32(1)})
	if err != nil || len(l1.Contents) != 1 || aws.ToString(l1.Contents[0].Key) != "sdk/b.bin" || !aws.ToBool(l1.IsTruncated) {
		t.Fatalf("ListObjects after sdk/a.bin, one key: %+v %v", l1, err)
	}
	lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("sdk/")})
	if err != nil {
		t.Fatalf("ListObjectVersions: %v", err)
	}
	var vs []s3types.ObjectIdentifier
	var desc []string
	for _, v := range lv.Versions {
		vs = append(vs, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		desc = append(desc, fmt.Sprintf("%s %s latest=%v", aws.ToString(v.Key), aws.ToString(v.VersionId), aws.ToBool(v.IsLatest)))
	}
	if len(desc) != 4 || desc[0] != fmt.Sprintf("sdk/a.bin %s latest=true", aws.ToString(v2.VersionId)) ||
		desc[1] != fmt.Sprintf("sdk/a.bin %s latest=false", aws.ToString(v1.VersionId)) {
		t.Fatalf("ListObjectVersions:\n%s", strings.Join(desc, "\n"))
	}

	sdkPresigned(t, e, c, direct, bucket)
	sdkDeleteVersions(t, c, bucket, vs)
}

// sdkPresigned PUTs sdk/presigned.bin into bucket through a URL
// aws-sdk-go-v2 presigned, and GETs it back through another.
func sdkPresigned(t *testing.T, e *harness.Env, c, direct *s3.Client, bucket string) {
	ctx := t.Context()
	b := aws.String(bucket)
	hc := e.HTTPClient(t)
	presign := s3.NewPresignClient(c, s3.WithPresignExpires(5*time.Minute))
	presigned := harness.NewData(964, 2*kib)
	preq, err := presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: b, Key: aws.String("sdk/presigned.bin")})
	if err != nil {
		t.Fatal(err)
	}
	put := newRequest(t, preq.Method, preq.URL, presigned.Bytes())
	for k, v := range preq.SignedHeader {
		if k != "Host" {
			put.Header[k] = v
		}
	}
	requireStatus(t, do(t, hc, put), http.StatusOK)
	requireObject(t, direct, bucket, "sdk/presigned.bin", presigned)
	greq, err := presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: b, Key: aws.String("sdk/presigned.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if body := httpGetBody(t, hc, greq.URL); !bytes.Equal(body, presigned.Bytes()) {
		t.Fatalf("presigned GET returned %d bytes that differ", len(body))
	}
}

// sdkDeleteVersions deletes the versions vs of bucket in one DeleteObjects,
// after which only sdk/presigned.bin is left under sdk/.
func sdkDeleteVersions(t *testing.T, c *s3.Client, bucket string, vs []s3types.ObjectIdentifier) {
	ctx := t.Context()
	b := aws.String(bucket)
	del, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: b, Delete: &s3types.Delete{Objects: vs}})
	if err != nil {
		t.Fatalf("DeleteObjects: %v", err)
	}
	if len(del.Errors) != 0 || len(del.Deleted) != len(vs) {
		t.Fatalf("DeleteObjects of %d versions: %d deleted, errors %+v", len(vs), len(del.Deleted), del.Errors)
	}
	lv, err := c.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String("sdk/")})
	if err != nil {
		t.Fatalf("ListObjectVersions after DeleteObjects: %v", err)
	}
	if len(lv.Versions) != 1 || aws.ToString(lv.Versions[0].Key) != "sdk/presigned.bin" || len(lv.DeleteMarkers) != 0 {
		t.Fatalf("ListObjectVersions after DeleteObjects: versions %+v delete markers %+v, want only sdk/presigned.bin", lv.Versions, lv.DeleteMarkers)
	}
}

// sdkObjectConfig sets, reads back and deletes the tags of sdk/a.bin, whose
// older version is old (of oldSize bytes), sets its ACL and reads the old
// version's attributes, with aws-sdk-go-v2.
func sdkObjectConfig(t *testing.T, c, direct *s3.Client, bucket string, old *s3.PutObjectOutput, oldSize int64) {
	ctx := t.Context()
	b, key := aws.String(bucket), aws.String("sdk/a.bin")
	if _, err := c.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: b, Key: key,
		Tagging: &s3types.Tagging{TagSet: []s3types.Tag{{Key: aws.String("class"), Value: aws.String("warm")}}}}); err != nil {
		t.Fatalf("PutObjectTagging: %v", err)
	}
	ot, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: key})
	if err != nil || len(ot.TagSet) != 1 || aws.ToString(ot.TagSet[0].Key) != "class" || aws.ToString(ot.TagSet[0].Value) != "warm" {
		t.Fatalf("GetObjectTagging: %+v %v", ot, err)
	}
	// The older version's tags are its own.
	if ot, err := c.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: b, Key: key, VersionId: old.VersionId}); err != nil || len(ot.TagSet) != 0 {
		t.Fatalf("GetObjectTagging of version %s: %+v %v, want no tags", aws.ToString(old.VersionId), ot, err)
	}
	if _, err := c.DeleteObjectTagging(ctx, &s3.DeleteObjectTaggingInput{Bucket: b, Key: key}); err != nil {
		t.Fatalf("DeleteObjectTagging: %v", err)
	}
	requireBackendObjectTags(t, direct, bucket, "sdk/a.bin", map[string]string{})

	if _, err := c.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: b, Key: key, ACL: s3types.ObjectCannedACLPrivate}); err != nil {
		t.Fatalf("PutObjectAcl private: %v", err)
	}
	oacl, err := c.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: b, Key: key})
	if err != nil || len(oacl.Grants) != 1 || oacl.Grants[0].Permission != s3types.PermissionFullControl {
		t.Fatalf("GetObjectAcl: %+v %v", oacl, err)
	}

	attrs, err := c.GetObjectAttributes(ctx, &s3.GetObjectAttributesInput{Bucket: b, Key: key, VersionId: old.VersionId,
		ObjectAttributes: []s3types.ObjectAttributes{s3types.ObjectAttributesEtag, s3types.ObjectAttributesObjectSize, s3types.ObjectAttributesStorageClass}})
	if err != nil || aws.ToInt64(attrs.ObjectSize) != oldSize || aws.ToString(attrs.ETag) != strings.Trim(aws.ToString(old.ETag), `"`) {
		t.Fatalf("GetObjectAttributes of version %s: %+v %v", aws.ToString(old.VersionId), attrs, err)
	}
}

// sdkBucketConfig sets and reads back bucket's tagging, versioning (which
// it turns on), lifecycle, policy and ACL with aws-sdk-go-v2.
func sdkBucketConfig(t *testing.T, c *s3.Client, bucket string) {
	ctx := t.Context()
	b := aws.String(bucket)
	// Tagging.
	wantTags := map[string]string{"team": "storage", "client": "aws-sdk-go-v2"}
	var tagSet []s3types.Tag
	for k, v := range wantTags {
		tagSet = append(tagSet, s3types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	if _, err := c.PutBucketTagging(ctx, &s3.PutBucketTaggingInput{Bucket: b, Tagging: &s3types.Tagging{TagSet: tagSet}}); err != nil {
		t.Fatalf("PutBucketTagging: %v", err)
	}
	gt, err := c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	if err != nil {
		t.Fatalf("GetBucketTagging: %v", err)
	}
	gotTags := map[string]string{}
	for _, tag := range gt.TagSet {
		gotTags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
	}
	if !maps.Equal(gotTags, wantTags) {
		t.Fatalf("GetBucketTagging: %v, want %v", gotTags, wantTags)
	}
	if _, err := c.DeleteBucketTagging(ctx, &s3.DeleteBucketTaggingInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketTagging: %v", err)
	}
	_, err = c.GetBucketTagging(ctx, &s3.GetBucketTaggingInput{Bucket: b})
	requireAPIError(t, err, "NoSuchTagSet")

	// Versioning.
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	if v, err := c.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: b}); err != nil || v.Status != s3types.BucketVersioningStatusEnabled {
		t.Fatalf("GetBucketVersioning: %+v %v", v, err)
	}

	// Lifecycle.
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: b,
		LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: []s3types.LifecycleRule{{
			ID:         aws.String("expire-tmp"),
			Status:     s3types.ExpirationStatusEnabled,
			Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(9)},
		}}}}); err != nil {
		t.Fatalf("PutBucketLifecycleConfiguration: %v", err)
	}
	lc, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil || len(lc.Rules) != 1 || aws.ToString(lc.Rules[0].ID) != "expire-tmp" || lc.Rules[0].Filter == nil ||
		aws.ToString(lc.Rules[0].Filter.Prefix) != "tmp/" || lc.Rules[0].Expiration == nil || aws.ToInt32(lc.Rules[0].Expiration.Days) != 9 {
		t.Fatalf("GetBucketLifecycleConfiguration: %+v %v", lc, err)
	}
	if _, err := c.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketLifecycle: %v", err)
	}
	_, err = c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: b})
	requireAPIError(t, err, "NoSuchLifecycleConfiguration")

	// Policy and its status.
	if _, err := c.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(publicPolicy(bucket))}); err != nil {
		t.Fatalf("PutBucketPolicy: %v", err)
	}
	pol, err := c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
	if err != nil {
		t.Fatalf("GetBucketPolicy: %v", err)
	}
	requirePublicPolicy(t, aws.ToString(pol.Policy), bucket)
	ps, err := c.GetBucketPolicyStatus(ctx, &s3.GetBucketPolicyStatusInput{Bucket: b})
	if err != nil || ps.PolicyStatus == nil || !aws.ToBool(ps.PolicyStatus.IsPublic) {
		t.Fatalf("GetBucketPolicyStatus with a public policy: %+v %v", ps, err)
	}
	if _, err := c.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: b}); err != nil {
		t.Fatalf("DeleteBucketPolicy: %v", err)
	}
	_, err = c.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: b})
	requireAPIError(t, err, "NoSuchBucketPolicy")

	// Bucket ACL.
	if _, err := c.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: b, ACL: s3types.BucketCannedACLPrivate}); err != nil {
		t.Fatalf("PutBucketAcl private: %v", err)
	}
	bacl, err := c.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: b})
	if err != nil || len(bacl.Grants) != 1 || bacl.Grants[0].Permission != s3types.PermissionFullControl {
		t.Fatalf("GetBucketAcl: %+v %v", bacl, err)
	}
}
