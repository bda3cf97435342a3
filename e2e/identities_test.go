//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/reclaim"
)

// s3Policy is an IAM policy allowing actions on buckets and their objects.
func s3Policy(actions []string, buckets ...string) string {
	var res []string
	for _, b := range buckets {
		res = append(res, `"arn:aws:s3:::`+b+`"`, `"arn:aws:s3:::`+b+`/*"`)
	}
	return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["` + strings.Join(actions, `","`) +
		`"],"Resource":[` + strings.Join(res, ",") + `]}]}`
}

// reclaimerMinimumPolicy is the reclaimer's minimum policy on bucket, as
// docs/architecture.md ("Backend identities") gives it, with bucket the
// restore witness's (the first of reclaim.buckets).
func reclaimerMinimumPolicy(bucket string) string {
	return `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Allow","Action":["s3:ListBucket","s3:ListBucketMultipartUploads","s3:ListBucketVersions","s3:GetBucketVersioning"],"Resource":["arn:aws:s3:::` + bucket + `"]},` +
		`{"Effect":"Allow","Action":["s3:ListMultipartUploadParts","s3:AbortMultipartUpload","s3:GetObject","s3:GetObjectVersion","s3:DeleteObject"],"Resource":["arn:aws:s3:::` + bucket + `/*"]},` +
		`{"Effect":"Allow","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::` + bucket + `/.sweepgate-witness/*"]}]}`
}

// requireDenied checks that err is MinIO's AccessDenied passed through as
// an S3 XML error with status 403.
func requireDenied(t *testing.T, what string, err error) {
	t.Helper()
	var re *awshttp.ResponseError
	if code := apiErrorCode(err); code != "AccessDenied" || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Fatalf("%s: %v, want a 403 AccessDenied from MinIO", what, err)
	}
}

const identityShared, identityPrivate = "shared", "private"

// TestBackendIdentities runs the binary with client credentials mapped to
// two MinIO users of different policies, and the reclaimer on a third
// user with the documented minimum policy on one of the two buckets of
// reclaim.buckets: MinIO's policies apply per client through the gateway,
// /readyz is green with the scoped key, and a pass reclaims an abandoned
// upload in its bucket while it reports the other bucket as denied and
// touches nothing there.
func TestBackendIdentities(t *testing.T) {
	t.Parallel()
	e := startIdentities(t)
	clientPolicies(t, e)
	resp, err := http.Get(e.Gateway.AdminEndpoint + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	requireStatus(t, resp, http.StatusOK)
	scopedReclaimer(t, e)
}

// startIdentities starts MinIO with the users reader (read shared),
// writer (all of shared) and reclaimer (the minimum policy on shared), the
// buckets shared and private, and a gateway whose credential ro signs as
// reader, rw as writer, and whose reclaimer signs as reclaimer (its secret
// read from a file) and sweeps both buckets.
func startIdentities(t *testing.T) *harness.Env {
	t.Helper()
	m := harness.StartMinIO(t)
	ctx := t.Context()
	users := []struct{ name, secret, policy string }{
		{"reader", "reader-secret-1", s3Policy([]string{"s3:GetObject", "s3:ListBucket"}, identityShared)},
		{"writer", "writer-secret-1", s3Policy([]string{"s3:*"}, identityShared)},
		{"reclaimer", "reclaimer-secret-1", reclaimerMinimumPolicy(identityShared)},
	}
	for _, u := range users {
		if err := m.AddUser(ctx, u.name, u.secret, u.policy); err != nil {
			t.Fatal(err)
		}
	}
	secretFile := filepath.Join(t.TempDir(), "reclaimer.secret")
	if err := os.WriteFile(secretFile, []byte("reclaimer-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := harness.StartGateway(t, m, harness.Options{Config: map[string]any{
		"backend": map[string]any{"identities": []map[string]any{
			{"name": "reader", "access_key": "reader", "secret_key": "reader-secret-1"},
			{"name": "writer", "access_key": "writer", "secret_key": "writer-secret-1"},
			{"name": "reclaimer", "access_key": "reclaimer", "secret_key_file": secretFile},
		}},
		"credentials": []map[string]any{
			{"access_key": "ro", "secret_key": "ro-secret-12345", "backend": "reader"},
			{"access_key": "rw", "secret_key": "rw-secret-12345", "backend": "writer"},
		},
		"reclaim": map[string]any{
			"backend_identity": "reclaimer", "buckets": []string{identityShared, identityPrivate},
			"grace": reclaimGrace.String(), "delete_after": "1s", "interval": "1h",
			// The one upload the sweep sees is the one it reclaims.
			"max_mark_fraction": 1, "max_delete_fraction": 1, "max_delete_uploads_fraction": 1,
		},
	}})
	e := &harness.Env{MinIO: m, Gateway: g, Endpoint: g.Endpoint, TLSEndpoint: g.TLSEndpoint, TLSConfig: g.TLSConfig(),
		AccessKey: m.AccessKey, SecretKey: m.SecretKey, Region: m.Region}
	for _, b := range []string{identityShared, identityPrivate} {
		if _, err := e.DirectSDK(t).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// clientPolicies: ro reads, and MinIO refuses its PUT and its
// CreateMultipartUpload (nothing written, no session recorded); rw writes
// and completes a multipart upload.
func clientPolicies(t *testing.T, e *harness.Env) {
	t.Helper()
	ctx := t.Context()
	direct := e.DirectSDK(t)
	seed := harness.NewData(100, 1)
	putData(t, direct, identityShared, "seed", seed)
	ro := e.SDK(t, harness.WithCredentials("ro", "ro-secret-12345"))
	rw := e.SDK(t, harness.WithCredentials("rw", "rw-secret-12345"))

	requireObject(t, ro, identityShared, "seed", seed)
	_, err := ro.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(identityShared), Key: aws.String("by-ro"), Body: strings.NewReader("x")})
	requireDenied(t, "ro PutObject", err)
	requireAbsent(t, direct, identityShared, "by-ro")
	_, err = ro.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(identityShared), Key: aws.String("mp-ro")})
	requireDenied(t, "ro CreateMultipartUpload", err)
	requireNoUploads(t, direct, identityShared)
	if n := etcdCount(t, e.Gateway.EtcdClient(t), etcdPrefix+"sessions/"); n != 0 {
		t.Fatalf("etcd holds %d sessions after ro's refused CreateMultipartUpload", n)
	}

	data := harness.NewData(300, 2)
	putData(t, rw, identityShared, "by-rw", data)
	requireObject(t, direct, identityShared, "by-rw", data)
	id := createUpload(t, rw, identityShared, "mp-rw")
	parts := []s3types.CompletedPart{mustUploadPart(t, rw, identityShared, "mp-rw", id, 1, smallPart())}
	if _, err := completeUpload(ctx, rw, identityShared, "mp-rw", id, parts); err != nil {
		t.Fatalf("rw CompleteMultipartUpload: %v", err)
	}
	if _, err := direct.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(identityShared), Key: aws.String("mp-rw")}); err != nil {
		t.Fatalf("rw's multipart object on MinIO: %v", err)
	}
}

// scopedReclaimer abandons an upload in each bucket through the gateway
// and runs passes: the shared one is marked and then deleted, the private
// bucket is reported denied by every pass and its upload and session are
// left as they were.
func scopedReclaimer(t *testing.T, e *harness.Env) {
	t.Helper()
	g, direct := e.Gateway, e.DirectSDK(t)
	rw := e.SDK(t, harness.WithCredentials("rw", "rw-secret-12345"))
	root := e.SDK(t) // the backend's own key, accepted as the default identity
	idShared := createUpload(t, rw, identityShared, "abandoned")
	mustUploadPart(t, rw, identityShared, "abandoned", idShared, 1, smallPart())
	idPrivate := createUpload(t, root, identityPrivate, "abandoned")
	mustUploadPart(t, root, identityPrivate, "abandoned", idPrivate, 1, smallPart())
	abandonedAt := time.Now()
	store := newSessionStore(t, e)
	awaitLeading(t, g)

	pass := func() reclaim.Report {
		t.Helper()
		rep := runPass(t, g.AdminEndpoint)
		if rep.Stopped != "" || rep.Refused != "" {
			t.Fatalf("pass %d stopped %q, refused %q", rep.Pass, rep.Stopped, rep.Refused)
		}
		if !slices.Equal(rep.DeniedBuckets, []string{identityPrivate}) {
			t.Fatalf("pass %d: denied buckets %q, want [%s]", rep.Pass, rep.DeniedBuckets, identityPrivate)
		}
		if rep.Totals.Missing != 0 {
			t.Fatalf("pass %d reports %d missing sessions", rep.Pass, rep.Totals.Missing)
		}
		if got := backendPartNumbers(t, direct, identityPrivate, "abandoned", idPrivate); len(got) != 1 {
			t.Fatalf("after pass %d the denied bucket's upload has parts %v, want its one part", rep.Pass, got)
		}
		store.requireState(t, identityPrivate, idPrivate, "active")
		return rep
	}
	time.Sleep(time.Until(abandonedAt.Add(reclaimGrace + 200*time.Millisecond)))
	eventually(t, 30*time.Second, func() (bool, string) {
		rep := pass()
		return rep.Acted.Marked.Sessions == 1, fmt.Sprintf("pass %d marked %+v", rep.Pass, rep.Acted.Marked)
	})
	eventually(t, 30*time.Second, func() (bool, string) {
		time.Sleep(200 * time.Millisecond)
		rep := pass()
		return rep.Acted.Deleted.Sessions == 1, fmt.Sprintf("pass %d deleted %+v", rep.Pass, rep.Acted.Deleted)
	})
	requireUploadGone(t, direct, identityShared, "abandoned", idShared)
	store.requireState(t, identityShared, idShared, "aborted")
	metrics, err := g.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `sweepgate_reclaim_denied_buckets_total{sweep="uploads"} `) ||
		strings.Contains(metrics, `sweepgate_reclaim_denied_buckets_total{sweep="uploads"} 0`) {
		t.Errorf("sweepgate_reclaim_denied_buckets_total{sweep=\"uploads\"} is not counted:\n%s", grepLines(metrics, "denied_buckets"))
	}
}

// etcdCount counts the keys under prefix.
func etcdCount(t *testing.T, cli *clientv3.Client, prefix string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
