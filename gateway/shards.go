package gateway

import (
	"context"
	"net/http"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/multipart"
)

// Shard is the state of some buckets: the services over one etcd store,
// and whether that store can take a write now. Without etcd.shards the
// gateway has one, of Config.Sessions, Config.Digests and
// Config.StateHealth.
type Shard struct {
	// Name labels the shard in logs.
	Name string
	// Sessions serves the multipart calls of the shard's buckets; nil
	// passes them through.
	Sessions *multipart.Service
	// Digests serves the digest layout's requests when the layout lives
	// on this shard; nil otherwise.
	Digests *digests.Service
	// StateHealth is Config.StateHealth for this shard's store.
	StateHealth func() error
}

// ShardRouter names the shard of a bucket (package shards' Router).
type ShardRouter interface {
	// Lookup returns the index into Config.Shards of bucket's shard,
	// asking no etcd.
	Lookup(bucket string) int
	// Assign makes sure bucket's state may be written on its shard,
	// recording the assignment the first time; its error is an S3 error
	// to answer with.
	Assign(ctx context.Context, bucket string) error
}

// shardOf returns the shard of bucket: the only one without a router.
func (g *Gateway) shardOf(bucket string) *Shard {
	if g.router == nil {
		return &g.shards[0]
	}
	return &g.shards[g.router.Lookup(bucket)]
}

// refuseUnassigned answers a request about to write state of its bucket,
// and reports true, when the router refuses to let its shard take it
// (ShardRouter.Assign). Without shards it costs nothing.
func (g *Gateway) refuseUnassigned(w http.ResponseWriter, r *http.Request, req *request) bool {
	if g.router == nil {
		return false
	}
	if err := g.router.Assign(r.Context(), req.route.Bucket); err != nil {
		g.writeError(w, r, err)
		return true
	}
	return false
}
