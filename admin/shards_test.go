//go:build integration

package admin

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/etcdstore/etcdtest"
)

// shardedStores are two shards' stores, main and logs, under two prefixes
// of one embedded etcd, each with one session: up-main of bucket photos
// on main, up-logs of bucket logs on logs.
func shardedStores(t *testing.T) (main, logs *etcdstore.Store) {
	t.Helper()
	_, cli := etcdtest.Start(t)
	store := func(prefix, bucket, id string) *etcdstore.Store {
		keys, err := etcdstore.NewKeys(prefix)
		if err != nil {
			t.Fatal(err)
		}
		st := etcdstore.NewStore(cli, keys)
		s := etcdstore.Session{Bucket: bucket, Key: "k", UploadID: id, Owner: "alice"}
		s.Transition(etcdstore.StateActive, s.Created, "gateway", "created")
		if _, err := st.CreateSession(t.Context(), &s); err != nil {
			t.Fatal(err)
		}
		return st
	}
	return store("/main/", "photos", "up-main"), store("/logs/", "logs", "up-logs")
}

// shardCall sends a request to the admin API at base and returns its status
// and body.
func shardCall(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestAdminAPIShardRouting checks that with etcd.shards every per-shard
// endpoint reads and acts on the shard a request is about: its bucket's,
// else the one its shard parameter names, else the default; that shard=all
// reads every shard; and that an unknown shard, or one that contradicts
// the bucket's, is refused.
func TestAdminAPIShardRouting(t *testing.T) {
	t.Parallel()
	mainStore, logsStore := shardedStores(t)
	a := newHandler(Config{
		Shards: []Shard{
			{Name: "main", Store: mainStore, ReclaimerInfo: ReclaimerInfo{ID: "gw", Off: "off on main"}},
			{Name: "logs", Store: logsStore, ReclaimerInfo: ReclaimerInfo{ID: "gw", Off: "off on logs"}},
		},
		Route: func(bucket string) string {
			if bucket == "logs" {
				return "logs"
			}
			return "main"
		},
	})
	a.hosts = loopbackHosts()
	srv := httptest.NewServer(testAdminHandler(a))
	t.Cleanup(srv.Close)
	base := srv.URL + "/admin/v1"

	list := func(query string) []string {
		t.Helper()
		status, body := shardCall(t, http.MethodGet, base+"/sessions"+query, "")
		var l adminapi.SessionList
		if status != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("sessions%s: %d %s", query, status, body)
		}
		var out []string
		for _, s := range l.Sessions {
			out = append(out, s.Shard+":"+s.UploadID)
		}
		return out
	}
	for query, want := range map[string]string{
		"":                        "main:up-main",
		"?shard=main":             "main:up-main",
		"?shard=logs":             "logs:up-logs",
		"?bucket=logs":            "logs:up-logs",
		"?bucket=photos":          "main:up-main",
		"?shard=all":              "logs:up-logs main:up-main",
		"?shard=all&limit=1":      "logs:up-logs",
		"?bucket=logs&shard=logs": "logs:up-logs",
	} {
		if got := strings.Join(list(query), " "); got != want {
			t.Errorf("sessions%s: %q, want %q", query, got, want)
		}
	}

	status, body := shardCall(t, http.MethodGet, base+"/sessions/logs/up-logs", "")
	if status != http.StatusOK || !bytes.Contains(body, []byte(`"shard": "logs"`)) {
		t.Errorf("show of a session on shard logs: %d %s", status, body)
	}

	// Where a reclaimer is asked, the shard's own answers: each is off
	// here, saying which one it is.
	for _, c := range []struct{ method, path, body, want string }{
		{http.MethodGet, "/reclaim/status", "", "off on main"},
		{http.MethodGet, "/reclaim/status?shard=logs", "", "off on logs"},
		{http.MethodPost, "/reclaim/run?shard=logs", "{}", "off on logs"},
		{http.MethodGet, "/reclaim/plan?shard=logs", "", "off on logs"},
		{http.MethodGet, "/explain/uploads/logs/up-logs", "", "off on logs"},
		{http.MethodGet, "/explain/uploads/photos/up-main", "", "off on main"},
		{http.MethodPost, "/reclaim/orphans/adopt", `{"bucket":"logs","key":"k","upload_id":"u","principal":"p"}`, "off on logs"},
		{http.MethodPost, "/reclaim/orphans/delete", `{"refs":[{"bucket":"logs","key":"k","upload_id":"u"}]}`, "off on logs"},
		{http.MethodPost, "/migrate/run?shard=logs", `{"principal":"p"}`, "sessions are off"},
	} {
		status, body := shardCall(t, c.method, base+c.path, c.body)
		if status != http.StatusServiceUnavailable || !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("%s %s: %d %s, want 503 naming %q", c.method, c.path, status, body, c.want)
		}
	}

	status, body = shardCall(t, http.MethodGet, base+"/reclaim/status?shard=all", "")
	var all adminapi.ShardStatuses
	if status != http.StatusOK || json.Unmarshal(body, &all) != nil || len(all.Shards) != 2 ||
		all.Shards[0].Shard != "main" || all.Shards[1].Shard != "logs" || all.Shards[1].Error == nil ||
		!strings.Contains(all.Shards[1].Error.Message, "off on logs") {
		t.Errorf("reclaim status of every shard: %d %s", status, body)
	}

	shardRefusals(t, srv.URL)
}

// shardRefusals checks, on the sharded handler at url, the status page's
// row per shard and the refusals of unknown or contradicting shards.
func shardRefusals(t *testing.T, url string) {
	t.Helper()
	base := url + "/admin/v1"
	// The status page has a row per shard.
	status, body := shardCall(t, http.MethodGet, url+"/status", "")
	for _, want := range []string{`<td><code>logs</code></td><td colspan="3" class="warn">no reclaimer: off on logs</td>`, "<code>main</code>"} {
		if status != http.StatusOK || !bytes.Contains(body, []byte(want)) {
			t.Errorf("status page: %d, want %s in\n%s", status, want, body)
		}
	}

	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/sessions?shard=nope", ""},
		{http.MethodGet, "/reclaim/status?shard=nope", ""},
		{http.MethodPost, "/reclaim/run?shard=all", "{}"},
		{http.MethodGet, "/migrate/plan?shard=nope", ""},
		{http.MethodGet, "/sessions?bucket=logs&shard=main", ""},
		{http.MethodGet, "/sessions/logs/up-logs?shard=main", ""},
		{http.MethodPost, "/reclaim/orphans/delete", `{"refs":[{"bucket":"logs","key":"k","upload_id":"u"},{"bucket":"photos","key":"k","upload_id":"v"}]}`},
	} {
		status, body := shardCall(t, c.method, base+c.path, c.body)
		e, ok := decodeAPIError(body)
		if status != http.StatusBadRequest || !ok || e.Code != adminapi.CodeBadRequest || !strings.Contains(e.Message, "shard") {
			t.Errorf("%s %s: %d %s, want a 400 about the shard", c.method, c.path, status, body)
		}
	}
}

// TestAdminAPIWithoutShards checks that without etcd.shards no answer
// names a shard, and the shard parameter knows only the default one.
func TestAdminAPIWithoutShards(t *testing.T) {
	t.Parallel()
	mainStore, _ := shardedStores(t)
	a := newHandler(Config{Store: mainStore})
	a.hosts = loopbackHosts()
	srv := httptest.NewServer(testAdminHandler(a))
	t.Cleanup(srv.Close)
	base := srv.URL + "/admin/v1"
	for _, path := range []string{"/sessions", "/sessions?shard=default", "/sessions/photos/up-main"} {
		status, body := shardCall(t, http.MethodGet, base+path, "")
		if status != http.StatusOK || bytes.Contains(body, []byte(`"shard"`)) || !bytes.Contains(body, []byte("up-main")) {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	if status, body := shardCall(t, http.MethodGet, srv.URL+"/status", ""); status != http.StatusOK || bytes.Contains(body, []byte(`id="shards"`)) {
		t.Errorf("status page without shards: %d, want no shards section\n%s", status, body)
	}
	if status, body := shardCall(t, http.MethodGet, base+"/sessions?shard=logs", ""); status != http.StatusBadRequest {
		t.Errorf("sessions of an unknown shard: %d %s", status, body)
	}
}
