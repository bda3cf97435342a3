//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/e2e/harness"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// The session tests check the session promises end to end: every
// multipart call goes through the sweepgate binary to a real MinIO, and the
// tests look behind the gateway's back at both: at the session records in
// its embedded etcd (key layout in etcdstore.Keys) and at MinIO directly.

// etcdPrefix is the gateway's default key prefix.
const etcdPrefix = "/sweepgate/"

// sessionWait bounds the waits for something the gateway does in the
// background (the reconciler).
const sessionWait = 20 * time.Second

// sessionRecord is what the tests read of a session record: the fields
// etcdstore.Session stores, decoded from the JSON the gateway stores.
type sessionRecord struct {
	Bucket     string `json:"bucket"`
	Key        string `json:"key"`
	UploadID   string `json:"upload_id"`
	Owner      string `json:"owner"`
	State      string `json:"state"`
	Completion *struct {
		Location  string `json:"location"`
		Bucket    string `json:"bucket"`
		Key       string `json:"key"`
		ETag      string `json:"etag"`
		VersionID string `json:"version_id"`
	} `json:"completion"`
	Uncertain     string              `json:"uncertain"`
	AbortAttempts int                 `json:"abort_attempts"`
	History       []sessionTransition `json:"history"`
}

type sessionTransition struct {
	At     time.Time `json:"at"`
	From   string    `json:"from"`
	To     string    `json:"to"`
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
}

// path renders the history as from->to(actor) steps, for messages and
// comparisons.
func (s sessionRecord) path() string {
	var b strings.Builder
	for i, h := range s.History {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s->%s(%s)", h.From, h.To, h.Actor)
	}
	return b.String()
}

// transitioned reports whether the history holds a step from -> to.
func (s sessionRecord) transitioned(from, to string) (sessionTransition, bool) {
	for _, h := range s.History {
		if h.From == from && h.To == to {
			return h, true
		}
	}
	return sessionTransition{}, false
}

// partRecord is one recorded part.
type partRecord struct {
	Number int    `json:"n"`
	ETag   string `json:"etag"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// sessionStore reads and writes the gateway's records in its etcd: in
// shard mode (SWEEPGATE_E2E_SHARDS) in the etcd of each bucket's shard.
type sessionStore struct {
	// cli is the etcd of every bucket without shards, and the default
	// shard's with them.
	cli    *clientv3.Client
	prefix string
	// g, in shard mode, says which shard keeps each bucket's records;
	// t is the test whose cleanup closes the shards' clients.
	g       *harness.Gateway
	t       *testing.T
	mu      sync.Mutex
	clients map[string]*clientv3.Client
}

func newSessionStore(t *testing.T, e *harness.Env) *sessionStore {
	t.Helper()
	e.RequireGateway(t)
	return gatewayStore(t, e.Gateway, e.Gateway.EtcdClient(t))
}

// gatewayStore is the store of g's records; cli is a client of the etcd
// the gateway runs over (its default shard's in shard mode).
func gatewayStore(t *testing.T, g *harness.Gateway, cli *clientv3.Client) *sessionStore {
	s := &sessionStore{cli: cli, prefix: etcdPrefix}
	if g.ShardNames() != nil {
		s.g, s.t, s.clients = g, t, map[string]*clientv3.Client{}
	}
	return s
}

// client returns a client of the etcd that keeps bucket's records.
func (s *sessionStore) client(bucket string) *clientv3.Client {
	if s.g == nil {
		return s.cli
	}
	return s.shardClient(s.g.ShardOf(bucket))
}

func (s *sessionStore) shardClient(name string) *clientv3.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	cli, ok := s.clients[name]
	if !ok {
		cli = s.g.EtcdClientOfShard(s.t, name)
		s.clients[name] = cli
	}
	return cli
}

func (s *sessionStore) ctx(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), 15*time.Second)
}

func (s *sessionStore) sessionKey(bucket, uploadID string) string {
	return s.prefix + "sessions/" + url.PathEscape(bucket) + "/" + url.PathEscape(uploadID)
}

func (s *sessionStore) partsPrefix(uploadID string) string {
	return s.prefix + "parts/" + url.PathEscape(uploadID) + "/"
}

// lookup reads a session: the record, its raw value and mod revision;
// found is false when there is none.
func (s *sessionStore) lookup(t *testing.T, bucket, uploadID string) (rec sessionRecord, raw []byte, modRev int64, found bool) {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	resp, err := s.client(bucket).Get(ctx, s.sessionKey(bucket, uploadID))
	if err != nil {
		t.Fatalf("etcd: read session %s/%s: %v", bucket, uploadID, err)
	}
	if len(resp.Kvs) == 0 {
		return rec, nil, 0, false
	}
	raw = resp.Kvs[0].Value
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatalf("etcd: session %s is not JSON: %v\n%s", resp.Kvs[0].Key, err, raw)
	}
	return rec, raw, resp.Kvs[0].ModRevision, true
}

// session reads a session that must exist.
func (s *sessionStore) session(t *testing.T, bucket, uploadID string) sessionRecord {
	t.Helper()
	rec, _, _, ok := s.lookup(t, bucket, uploadID)
	if !ok {
		t.Fatalf("etcd: no session for upload %s in %s", uploadID, bucket)
	}
	return rec
}

// requireState checks a session's state now.
func (s *sessionStore) requireState(t *testing.T, bucket, uploadID, want string) sessionRecord {
	t.Helper()
	rec := s.session(t, bucket, uploadID)
	if rec.State != want {
		t.Fatalf("session %s is %s, want %s (history %s; uncertain %q)", uploadID, rec.State, want, rec.path(), rec.Uncertain)
	}
	return rec
}

// waitState polls until a session is in state want, failing the test when
// it is not within sessionWait.
func (s *sessionStore) waitState(t *testing.T, bucket, uploadID, want string) sessionRecord {
	t.Helper()
	var rec sessionRecord
	eventually(t, sessionWait, func() (bool, string) {
		var ok bool
		rec, _, _, ok = s.lookup(t, bucket, uploadID)
		return ok && rec.State == want, fmt.Sprintf("session %s is %q (history %s; uncertain %q), want %s", uploadID, rec.State, rec.path(), rec.Uncertain, want)
	})
	return rec
}

// sessionsIn reads every session of bucket.
func (s *sessionStore) sessionsIn(t *testing.T, bucket string) []sessionRecord {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	resp, err := s.client(bucket).Get(ctx, s.prefix+"sessions/"+url.PathEscape(bucket)+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd: list sessions: %v", err)
	}
	var out []sessionRecord
	for _, kv := range resp.Kvs {
		var rec sessionRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			t.Fatalf("etcd: session %s is not JSON: %v", kv.Key, err)
		}
		out = append(out, rec)
	}
	return out
}

// onlySession returns the one session of bucket.
func (s *sessionStore) onlySession(t *testing.T, bucket string) sessionRecord {
	t.Helper()
	all := s.sessionsIn(t, bucket)
	if len(all) != 1 {
		t.Fatalf("etcd: %d sessions in %s, want 1: %+v", len(all), bucket, all)
	}
	return all[0]
}

// parts reads the recorded parts of an upload to bucket by part number,
// checking that each key names the part number its record holds.
func (s *sessionStore) parts(t *testing.T, bucket, uploadID string) map[int]partRecord {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	prefix := s.partsPrefix(uploadID)
	resp, err := s.client(bucket).Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("etcd: list parts: %v", err)
	}
	out := map[int]partRecord{}
	for _, kv := range resp.Kvs {
		// A part record is in either layout (keyspace schema 1 or 2):
		// read it with the gateway's own decoder.
		stored, err := etcdstore.DecodePart(string(kv.Key), kv.Value)
		if err != nil {
			t.Fatalf("etcd: part %s: %v", kv.Key, err)
		}
		p := partRecord{Number: stored.Number, ETag: stored.ETag, Size: stored.Size, SHA256: stored.SHA256}
		n, err := strconv.Atoi(strings.TrimPrefix(string(kv.Key), prefix))
		if err != nil || n != p.Number {
			t.Fatalf("etcd: part key %s holds part %d", kv.Key, p.Number)
		}
		out[n] = p
	}
	return out
}

// etcdKV is one key's value and versions, for comparing snapshots.
type etcdKV struct {
	Value          string
	ModRev, Create int64
	Version        int64
}

// sessionSpaces are the parts of the key space that multipart calls write:
// sessions, part records, activity and idempotency records. Other
// sweepgate keys (the reclaimer's election, cursors and reports) change on
// their own schedule and are left out of the comparisons.
var sessionSpaces = []string{"sessions/", "parts/", "activity/", "idem/"}

// dump reads every key of the session key spaces, of every shard in
// shard mode (each key then after its shard's name).
func (s *sessionStore) dump(t *testing.T) map[string]etcdKV {
	t.Helper()
	ctx, cancel := s.ctx(t)
	defer cancel()
	out := map[string]etcdKV{}
	read := func(cli *clientv3.Client, shard string) {
		for _, space := range sessionSpaces {
			resp, err := cli.Get(ctx, s.prefix+space, clientv3.WithPrefix())
			if err != nil {
				t.Fatalf("etcd: dump %s%s %s: %v", s.prefix, space, shard, err)
			}
			for _, kv := range resp.Kvs {
				out[shard+string(kv.Key)] = etcdKV{Value: string(kv.Value), ModRev: kv.ModRevision, Create: kv.CreateRevision, Version: kv.Version}
			}
		}
	}
	if s.g == nil {
		read(s.cli, "")
		return out
	}
	for _, name := range s.g.ShardNames() {
		read(s.shardClient(name), "shard "+name+": ")
	}
	return out
}

// requireUnchanged compares two dumps and names every difference.
func requireUnchanged(t *testing.T, what string, before, after map[string]etcdKV) {
	t.Helper()
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(before)) {
		a, ok := after[k]
		switch {
		case !ok:
			diffs = append(diffs, "deleted "+k)
		case a != before[k]:
			diffs = append(diffs, fmt.Sprintf("changed %s (mod revision %d -> %d):\n  %s\n  %s", k, before[k].ModRev, a.ModRev, before[k].Value, a.Value))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if _, ok := before[k]; !ok {
			diffs = append(diffs, "added "+k+": "+after[k].Value)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("%s changed etcd:\n%s", what, strings.Join(diffs, "\n"))
	}
}

// edit rewrites a session record directly in etcd, as another writer (the
// reclaimer) would: one transaction that compares the mod revision it read.
// It fails the test when the record changed in between.
func (s *sessionStore) edit(t *testing.T, bucket, uploadID string, change func(rec map[string]any)) {
	t.Helper()
	_, raw, modRev, ok := s.lookup(t, bucket, uploadID)
	if !ok {
		t.Fatalf("etcd: no session for upload %s", uploadID)
	}
	var rec map[string]any
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	change(rec)
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	key := s.sessionKey(bucket, uploadID)
	ctx, cancel := s.ctx(t)
	defer cancel()
	resp, err := s.client(bucket).Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
		Then(clientv3.OpPut(key, string(b))).
		Commit()
	if err != nil {
		t.Fatalf("etcd: write session %s: %v", uploadID, err)
	}
	if !resp.Succeeded {
		t.Fatalf("etcd: session %s changed while the test edited it", uploadID)
	}
}

// setState moves a session to state directly in etcd, recording the step
// in its history as the reclaimer would.
func (s *sessionStore) setState(t *testing.T, bucket, uploadID, state string) {
	t.Helper()
	s.edit(t, bucket, uploadID, func(rec map[string]any) {
		now := time.Now().UTC().Format(time.RFC3339Nano)
		hist, _ := rec["history"].([]any)
		rec["history"] = append(hist, map[string]any{
			"at": now, "from": rec["state"], "to": state, "actor": "e2e-test", "reason": "set by the test",
		})
		rec["state"] = state
		if state == "expired" {
			rec["expired_at"] = now
		}
	})
}

// eventually polls cond every 20ms until it holds, failing the test with
// cond's last message when it does not within timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, msg)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("test ended while waiting: %s", msg)
		case <-tick.C:
		}
	}
}

func unquoteETag(s string) string { return strings.Trim(s, `"`) }

// concatSum returns the SHA-256 and size of the readers' bytes one after
// the other: what an object assembled from parts must hold.
func concatSum(t *testing.T, rs ...io.Reader) (string, int64) {
	t.Helper()
	sum, n, err := harness.HashReader(io.MultiReader(rs...))
	if err != nil {
		t.Fatal(err)
	}
	return sum, n
}

// requireObjectSum checks that bucket/key holds size bytes with SHA-256 sum.
func requireObjectSum(t *testing.T, c *s3.Client, bucket, key, sum string, size int64) *s3.GetObjectOutput {
	t.Helper()
	out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("GetObject %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	got, n, err := harness.HashReader(out.Body)
	if err != nil {
		t.Fatalf("read %s/%s: %v", bucket, key, err)
	}
	if got != sum || n != size {
		t.Fatalf("%s/%s: %d bytes sha256 %s, want %d bytes %s", bucket, key, n, got, size, sum)
	}
	return out
}

// requireUploadGone checks directly on MinIO that the upload is gone: its
// parts cannot be listed and no upload of the bucket has its id.
func requireUploadGone(t *testing.T, direct *s3.Client, bucket, key, uploadID string) {
	t.Helper()
	_, err := direct.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	requireAPIError(t, err, "NoSuchUpload")
	if ids := backendUploads(t, direct, bucket); slices.Contains(ids, uploadID) {
		t.Fatalf("MinIO still lists upload %s in %s", uploadID, bucket)
	}
}

// backendUploads lists the upload ids MinIO holds in bucket.
func backendUploads(t *testing.T, c *s3.Client, bucket string) []string {
	t.Helper()
	out, err := c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads %s: %v", bucket, err)
	}
	var ids []string
	for _, u := range out.Uploads {
		ids = append(ids, aws.ToString(u.UploadId))
	}
	return ids
}

// backendPartNumbers lists the part numbers MinIO holds for an upload.
func backendPartNumbers(t *testing.T, direct *s3.Client, bucket, key, uploadID string) map[int32]string {
	t.Helper()
	out, err := direct.ListParts(t.Context(), &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	if err != nil {
		t.Fatalf("ListParts on MinIO: %v", err)
	}
	parts := map[int32]string{}
	for _, p := range out.Parts {
		parts[aws.ToInt32(p.PartNumber)] = unquoteETag(aws.ToString(p.ETag))
	}
	return parts
}

// requireCompletedSession checks that a session ended completed with the
// object's ETag as its recorded result, passing through completing.
func requireCompletedSession(t *testing.T, s *sessionStore, bucket, uploadID, etag string) sessionRecord {
	t.Helper()
	rec := s.requireState(t, bucket, uploadID, "completed")
	if rec.Completion == nil || unquoteETag(rec.Completion.ETag) != unquoteETag(etag) {
		t.Fatalf("session %s recorded completion %+v, want ETag %s", uploadID, rec.Completion, etag)
	}
	if _, ok := rec.transitioned("completing", "completed"); !ok {
		t.Fatalf("session %s history %s has no completing->completed step", uploadID, rec.path())
	}
	if len(rec.History) == 0 || rec.History[0].To != "active" {
		t.Fatalf("session %s history %s does not start active", uploadID, rec.path())
	}
	return rec
}

// createUpload starts a multipart upload with aws-sdk-go-v2.
func createUpload(t *testing.T, c *s3.Client, bucket, key string) string {
	t.Helper()
	out, err := c.CreateMultipartUpload(t.Context(), &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("CreateMultipartUpload %s/%s: %v", bucket, key, err)
	}
	return aws.ToString(out.UploadId)
}

// uploadPart uploads one part with aws-sdk-go-v2.
func uploadPart(ctx context.Context, c *s3.Client, bucket, key, uploadID string, n int32, body *io.SectionReader) (*s3.UploadPartOutput, error) {
	return c.UploadPart(ctx, &s3.UploadPartInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID), PartNumber: aws.Int32(n),
		Body: body, ContentLength: aws.Int64(body.Size()),
	})
}

// mustUploadPart is uploadPart that fails the test on an error.
func mustUploadPart(t *testing.T, c *s3.Client, bucket, key, uploadID string, n int32, body *io.SectionReader) s3types.CompletedPart {
	t.Helper()
	out, err := uploadPart(t.Context(), c, bucket, key, uploadID, n, body)
	if err != nil {
		t.Fatalf("UploadPart %d of %s: %v", n, uploadID, err)
	}
	return s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32}
}

// completeUpload completes an upload with aws-sdk-go-v2.
func completeUpload(ctx context.Context, c *s3.Client, bucket, key, uploadID string, parts []s3types.CompletedPart) (*s3.CompleteMultipartUploadOutput, error) {
	return c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID),
		MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts},
	})
}

// abortUpload aborts an upload with aws-sdk-go-v2.
func abortUpload(ctx context.Context, c *s3.Client, bucket, key, uploadID string) error {
	_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	return err
}
