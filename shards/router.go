package shards

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3err"
)

// reloadBackoff spaces the directory's reloads while the default shard
// does not answer.
const reloadBackoff = time.Second

var after = time.After

// ErrConflict refuses a request whose bucket's state the configuration
// puts on one shard while the directory, or the state found, says another:
// nothing was changed, and only an operator can settle it (a retry cannot),
// so it is an internal error rather than a retryable one.
var ErrConflict = &s3err.Error{Code: "InternalError",
	Message:    "This bucket's state is kept on another etcd shard than this gateway's configuration names; nothing was changed. An operator must make etcd.shards agree with the shard directory (sweepgate shards list).",
	HTTPStatus: 500}

// Store is what the router needs of one shard: its name, and whether it
// holds state of a bucket (HoldsState).
type Store struct {
	Name string
	// Holds reports whether the shard holds any of bucket's state.
	Holds func(ctx context.Context, bucket string) (bool, error)
}

// Assigner is the directory as the router uses it (Directory).
type Assigner interface {
	Get(bucket string) (string, bool)
	Assign(ctx context.Context, bucket, shard string) (string, error)
}

// Router names the shard of each bucket: the one the directory names once
// it has an entry, else the one the configuration names. Assign makes the
// entry the first time a bucket's state is written.
type Router struct {
	stores     []Store        // the default first
	configured map[string]int // bucket -> index into stores, for listed buckets
	dir        Assigner
	log        *slog.Logger
}

// NewRouter returns the router over stores (the default shard first),
// placing each bucket of configured (bucket -> shard name) on its shard
// and every other bucket on the default one.
func NewRouter(stores []Store, configured map[string]string, dir Assigner, log *slog.Logger) (*Router, error) {
	if len(stores) == 0 {
		return nil, errors.New("shards: no shard")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Router{stores: stores, configured: make(map[string]int, len(configured)), dir: dir, log: log}
	for b, name := range configured {
		i := r.index(name)
		if i < 0 {
			return nil, fmt.Errorf("shards: bucket %s is on shard %s, which is not configured", b, name)
		}
		r.configured[b] = i
	}
	return r, nil
}

func (r *Router) index(name string) int {
	return slices.IndexFunc(r.stores, func(s Store) bool { return s.Name == name })
}

// Configured returns the index of the shard the configuration puts bucket
// on.
func (r *Router) Configured(bucket string) int {
	if i, ok := r.configured[bucket]; ok {
		return i
	}
	return 0
}

// Lookup returns the index of bucket's shard without asking etcd: the
// directory's entry as last seen when it names a configured shard, else
// the configured one.
func (r *Router) Lookup(bucket string) int {
	if name, ok := r.dir.Get(bucket); ok {
		if i := r.index(name); i >= 0 {
			return i
		}
	}
	return r.Configured(bucket)
}

// Assign makes sure the directory names bucket's configured shard before
// its state is written there. Known entries cost nothing; the first write
// of a bucket checks that no other shard holds state of it and then writes
// the entry (create-if-absent). It returns ErrConflict when the directory
// or another shard's state contradicts the configuration, and
// s3err.ErrStateUnavailable when a shard it must ask does not answer.
func (r *Router) Assign(ctx context.Context, bucket string) error {
	want := r.stores[r.Configured(bucket)].Name
	if name, ok := r.dir.Get(bucket); ok {
		if name == want {
			return nil
		}
		r.log.Error("refusing a request: the shard directory puts its bucket on another shard than the configuration",
			"bucket", bucket, "directory", name, "configured", want)
		return ErrConflict
	}
	for _, s := range r.stores {
		if s.Name == want {
			continue
		}
		held, err := s.Holds(ctx, bucket)
		if err != nil {
			r.log.Warn("cannot assign a bucket to its shard: another shard does not answer whether it holds the bucket's state",
				"bucket", bucket, "shard", want, "asked", s.Name, "err", err)
			return s3err.ErrStateUnavailable
		}
		if held {
			r.log.Error("refusing a request: another shard holds state of its bucket, which the configuration puts on this shard; move the bucket with sweepgate shards move",
				"bucket", bucket, "configured", want, "holder", s.Name)
			return ErrConflict
		}
	}
	stored, err := r.dir.Assign(ctx, bucket, want)
	if err != nil {
		r.log.Warn("cannot write a bucket's shard directory entry", "bucket", bucket, "shard", want, "err", err)
		return s3err.ErrStateUnavailable
	}
	if stored != want {
		r.log.Error("refusing a request: the shard directory puts its bucket on another shard than the configuration",
			"bucket", bucket, "directory", stored, "configured", want)
		return ErrConflict
	}
	r.log.Info("bucket assigned to its shard", "bucket", bucket, "shard", want)
	return nil
}

// Check compares the directory with the configuration and returns an
// error naming every bucket the directory puts on another shard than the
// configuration does, with both shards and the command that moves it.
func (r *Router) Check(entries map[string]string) error {
	var errs []error
	buckets := make([]string, 0, len(entries))
	for b := range entries {
		buckets = append(buckets, b)
	}
	slices.Sort(buckets)
	for _, b := range buckets {
		stored, want := entries[b], r.stores[r.Configured(b)].Name
		if stored != want {
			errs = append(errs, fmt.Errorf("bucket %s: its state is on shard %s (shard directory), but etcd.shards puts it on shard %s; "+
				"configure it on %s again, or stop every gateway and run: sweepgate shards move %s --to %s --apply", b, stored, want, stored, b, want))
		}
	}
	return errors.Join(errs...)
}

// HoldsState reports whether store holds any of bucket's state: an upload
// session or a reference object's record under the bucket.
func HoldsState(ctx context.Context, cli *clientv3.Client, keys etcdstore.Keys, bucket string) (bool, error) {
	for _, prefix := range []string{keys.Sessions(bucket), keys.RefSources(bucket)} {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return false, err
		}
		if resp.Count > 0 {
			return true, nil
		}
	}
	return false, nil
}
