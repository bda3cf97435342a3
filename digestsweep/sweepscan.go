package digestsweep

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// errSweepScanDone ends a scan early without failing it.
var errSweepScanDone = errors.New("digestsweep: scan done")

// sweepScan calls fn for every key in [start, end), with the revision it
// was read at, in key order. Each request reads one bounded stretch of the
// range at the latest revision (etcdstore.RangePager with LatestRev), so
// no request counts more than about a page of keys past the first, and a
// long scan never reads a revision that compaction may have removed. A
// key that exists throughout the scan is passed exactly once, one written
// or deleted during it at most once, as each write fn makes compares what
// was read. It holds one page of at most limit keys at a time.
func sweepScan(ctx context.Context, cli *clientv3.Client, start, end string, limit int64, fn func(kv *mvccpb.KeyValue, rev int64) error) error {
	p := etcdstore.NewRangePager(cli.KV, start, end, etcdstore.LatestRev, limit)
	for {
		kvs, rev, err := p.Next(ctx)
		if err != nil || len(kvs) == 0 {
			return err
		}
		for _, kv := range kvs {
			if err := fn(kv, rev); err != nil {
				return err
			}
		}
	}
}
