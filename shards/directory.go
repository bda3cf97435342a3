// Package shards keeps each bucket's state on one of several etcd clusters
// (etcd.shards): the directory of which shard holds each bucket, kept in
// the default shard, and the router that sends a request needing state to
// its bucket's shard. A bucket is never moved silently: its shard is
// written in the directory the first time its state is, and a
// configuration that contradicts the directory is refused
// (docs/architecture.md, "Shards").
package shards

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Directory is the shard directory in the default shard's etcd
// (etcdstore.Keys.ShardBuckets), with a copy in memory that Load fills and
// Run keeps current, so that routing a request reads no etcd once its
// bucket's entry is known.
type Directory struct {
	cli  *clientv3.Client
	keys etcdstore.Keys

	mu      sync.RWMutex
	buckets map[string]string
	rev     int64 // the revision the copy is current at
}

// NewDirectory returns the directory under keys in cli's cluster, empty
// until Load.
func NewDirectory(cli *clientv3.Client, keys etcdstore.Keys) *Directory {
	return &Directory{cli: cli, keys: keys, buckets: make(map[string]string)}
}

// Load reads the whole directory.
func (d *Directory) Load(ctx context.Context) error {
	resp, err := d.cli.Get(ctx, d.keys.ShardBuckets(), clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("shard directory: %w", err)
	}
	m := make(map[string]string, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if b, ok := d.bucketOf(string(kv.Key)); ok {
			m[b] = string(kv.Value)
		}
	}
	d.mu.Lock()
	d.buckets, d.rev = m, resp.Header.Revision
	d.mu.Unlock()
	return nil
}

func (d *Directory) bucketOf(key string) (string, bool) {
	b, ok := strings.CutPrefix(key, d.keys.ShardBuckets())
	if !ok {
		return "", false
	}
	b, err := url.PathUnescape(b)
	return b, err == nil
}

// Run follows the directory's changes until ctx ends, reloading it whole
// when its watch cannot resume (compacted history). While the default
// shard does not answer, the copy stays as it was.
func (d *Directory) Run(ctx context.Context) {
	for ctx.Err() == nil {
		d.mu.RLock()
		rev := d.rev
		d.mu.RUnlock()
		wch := d.cli.Watch(clientv3.WithRequireLeader(ctx), d.keys.ShardBuckets(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.CompactRevision != 0 || resp.Err() != nil {
				break
			}
			d.mu.Lock()
			for _, ev := range resp.Events {
				b, ok := d.bucketOf(string(ev.Kv.Key))
				if !ok {
					continue
				}
				if ev.Type == clientv3.EventTypeDelete {
					delete(d.buckets, b)
				} else {
					d.buckets[b] = string(ev.Kv.Value)
				}
			}
			d.rev = resp.Header.Revision
			d.mu.Unlock()
		}
		if ctx.Err() != nil {
			return
		}
		// The watch ended: reload, then follow again from the new copy.
		for ctx.Err() == nil {
			if err := d.Load(ctx); err == nil {
				break
			}
			select {
			case <-ctx.Done():
			case <-after(reloadBackoff):
			}
		}
	}
}

// Get returns the shard the directory names for bucket, as last seen.
func (d *Directory) Get(bucket string) (string, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s, ok := d.buckets[bucket]
	return s, ok
}

// All returns a copy of the directory as last seen.
func (d *Directory) All() map[string]string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]string, len(d.buckets))
	for b, s := range d.buckets {
		out[b] = s
	}
	return out
}

// Assign writes shard as bucket's entry unless the directory has one, in
// one transaction, and returns the entry now stored: shard, or the one
// written before.
func (d *Directory) Assign(ctx context.Context, bucket, shard string) (string, error) {
	key := d.keys.ShardBucket(bucket)
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, shard)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return "", fmt.Errorf("shard directory: %w", err)
	}
	stored := shard
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", fmt.Errorf("shard directory: the entry of %s vanished while it was read", bucket)
		}
		stored = string(kvs[0].Value)
	}
	d.mu.Lock()
	d.buckets[bucket] = stored
	d.mu.Unlock()
	return stored, nil
}
