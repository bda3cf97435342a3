package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/sweepgate/sweepgate/admin/adminapi"
	"github.com/sweepgate/sweepgate/config"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/migrate"
	"github.com/sweepgate/sweepgate/reclaim"
)

// Shard is one etcd shard's state as the admin API serves it
// (etcd.shards): its store, its reclaimer with its own election and term,
// its progress hub and its migrator.
type Shard struct {
	Name          string
	Store         *etcdstore.Store
	Reclaimer     *reclaim.Reclaimer
	ReclaimerInfo ReclaimerInfo
	Progress      *ProgressHub
	Migrator      *migrate.Migrator
}

// shardAPI serves the endpoints over one shard's state: the sessions,
// the reclaimer, explain and migrate, on a mux of its own that the
// handler's dispatch hands each request to.
type shardAPI struct {
	name     string
	sessions sessionsAPI
	reclaim  reclaimAPI
	migrator *migrate.Migrator
	mux      *http.ServeMux
}

// shardParam is the query parameter that names a shard; shardAll, where a
// read takes it, reads every shard.
const (
	shardParam = "shard"
	shardAll   = "all"
)

// shardRoutes builds every shard's mux and routes the per-shard endpoints
// to dispatch. Without shards the only shard is the default one, and
// nothing in the answers names it.
func (a *handler) shardRoutes(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	if len(a.shards) == 0 {
		a.shards = []*shardAPI{{name: config.DefaultShard, sessions: a.sessions, reclaim: a.reclaim, migrator: a.migrator}}
	}
	none := func(h http.Handler) http.Handler { return h }
	for _, sh := range a.shards {
		if a.sharded {
			sh.sessions.shard, sh.reclaim.shard = sh.name, sh.name
		}
		sh.mux = http.NewServeMux()
		sh.sessions.routes(sh.mux, none)
		sh.reclaim.routes(sh.mux, none)
		explainAPI{reclaim: &sh.reclaim}.routes(sh.mux, none)
		migrateAPI{m: sh.migrator, reclaim: &sh.reclaim}.routes(sh.mux, none)
	}
	dispatch := protect(http.HandlerFunc(a.dispatch))
	for _, p := range []string{"/admin/v1/sessions", "/admin/v1/sessions/", "/admin/v1/reclaim/", "/admin/v1/explain/", "/admin/v1/migrate/"} {
		mux.Handle(p, dispatch)
	}
	mux.Handle("/admin/v1/", protect(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, http.StatusNotFound, adminapi.CodeNotFound, fmt.Sprintf("no admin API endpoint %s", r.URL.Path))
	})))
}

// dispatch hands a request to the shard it is about: the shard of its
// bucket where it names one, else the shard its shard parameter names,
// else the default shard. An unknown shard, or a shard parameter that
// contradicts the bucket's, is refused with 400.
func (a *handler) dispatch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name, named := q.Get(shardParam), q.Has(shardParam)
	buckets, err := requestBuckets(r)
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	var sh *shardAPI
	switch {
	case len(buckets) > 0:
		if sh, err = a.bucketShard(buckets); err == nil && named && name != sh.name {
			err = fmt.Errorf("shard %q: bucket %q is on shard %s", name, buckets[0], sh.name)
		}
	case named && name == shardAll && r.Method == http.MethodGet && (r.URL.Path == "/admin/v1/sessions" || r.URL.Path == "/admin/v1/reclaim/status"):
		a.readAll(w, r)
		return
	case named:
		if sh = a.shard(name); sh == nil {
			err = fmt.Errorf("unknown shard %q; the shards are %s", name, a.shardNames())
		}
	case strings.HasPrefix(r.URL.Path, "/admin/v1/explain/digests/"):
		sh = a.shard(a.digestShard)
	}
	if err != nil {
		writeAPIError(w, http.StatusBadRequest, adminapi.CodeBadRequest, err.Error())
		return
	}
	if sh == nil {
		sh = a.shards[0]
	}
	if named {
		r = withoutShard(r)
	}
	sh.mux.ServeHTTP(w, r)
}

// withoutShard is r without its shard parameter, which the shard's own
// endpoints do not take.
func withoutShard(r *http.Request) *http.Request {
	q := r.URL.Query()
	q.Del(shardParam)
	r2 := r.Clone(r.Context())
	r2.URL.RawQuery = q.Encode()
	return r2
}

func (a *handler) shard(name string) *shardAPI {
	for _, sh := range a.shards {
		if sh.name == name {
			return sh
		}
	}
	return nil
}

func (a *handler) shardNames() string {
	names := make([]string, len(a.shards))
	for i, sh := range a.shards {
		names[i] = sh.name
	}
	return strings.Join(names, ", ") + " (or " + shardAll + ", where the endpoint reads)"
}

// bucketShard is the shard that holds the state of every bucket of
// buckets, or an error when they are on different shards.
func (a *handler) bucketShard(buckets []string) (*shardAPI, error) {
	var sh *shardAPI
	for _, b := range buckets {
		s := a.shards[0]
		if a.route != nil {
			if s = a.shard(a.route(b)); s == nil {
				s = a.shards[0]
			}
		}
		if sh != nil && s != sh {
			return nil, fmt.Errorf("the request names buckets on different shards (%s on %s, %s on %s): send one request per shard", buckets[0], sh.name, b, s.name)
		}
		sh = s
	}
	return sh, nil
}

// requestBuckets are the buckets a request is about, which choose its
// shard: the bucket in the path of a session or an upload's explanation,
// the bucket parameter of a session list, and the buckets of an orphan
// adoption or deletion (whose body is read here and restored).
func requestBuckets(r *http.Request) ([]string, error) {
	p := r.URL.Path
	for _, prefix := range []string{"/admin/v1/sessions/", "/admin/v1/explain/uploads/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			if b, _, ok := strings.Cut(rest, "/"); ok && b != "" {
				return []string{b}, nil
			}
			return nil, nil
		}
	}
	if p == "/admin/v1/sessions" {
		if b := r.URL.Query().Get("bucket"); b != "" {
			return []string{b}, nil
		}
		return nil, nil
	}
	if r.Method != http.MethodPost || (p != "/admin/v1/reclaim/orphans/adopt" && p != "/admin/v1/reclaim/orphans/delete") {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var doc struct {
		Bucket string               `json:"bucket"`
		Refs   []adminapi.OrphanRef `json:"refs"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return nil, nil // the endpoint says what is wrong with it
	}
	var out []string
	if doc.Bucket != "" {
		out = append(out, doc.Bucket)
	}
	for _, ref := range doc.Refs {
		if ref.Bucket != "" && !slices.Contains(out, ref.Bucket) {
			out = append(out, ref.Bucket)
		}
	}
	return out, nil
}
