package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Blob is one stored blob of a CAS namespace, as the backend listed it.
type Blob struct {
	Digest   string
	Bucket   string
	Key      string
	Size     int64
	Modified time.Time
}

// Inventory is one owner of references to digests. The digest sweep asks
// each inventory which blobs of a listing page it retains and sees only
// digests, so that a new kind of owner needs only a new inventory.
//
// An inventory reads what it knows at the pass's etcd revision. One whose
// reads cannot share that revision proves itself another way, or fails
// with errRetired; any error makes the pass keep everything.
type Inventory interface {
	// Name names the inventory in reports ("references", "trash", ...).
	Name() string
	// Retained returns the digests among blobs (one listing page of one
	// namespace) that it retains.
	Retained(ctx context.Context, blobs []Blob) (map[string]bool, error)
}

// errRetired says an inventory could not prove that its reads hold for the
// pass's revision: it is retired for the pass, and the pass keeps
// everything.
var errRetired = errors.New("digestsweep: inventory retired for this pass")

// sweepRangeLimit is how many keys one ranged read of an inventory asks for.
const sweepRangeLimit = 1000

// digestRange reads, at revision rev (the latest when 0), the keys of
// every digest among digests under the per-digest prefixes that prefixOf
// makes, and calls fn for each key of one of digests. When fn answers
// done, the rest of that digest's keys are skipped. The keys from the
// first digest's prefix to the last's are read a bounded stretch a
// request (etcdstore.RangePager), at most sweepRangeLimit keys each, so
// that no request counts more than about a page of them past the first.
// Memory is bounded by the page and the digests given.
func digestRange(ctx context.Context, cli *clientv3.Client, rev int64, digests []string, prefixOf func(string) string,
	keysOnly bool, fn func(digest string, value []byte) (done bool, err error)) error {
	if len(digests) == 0 {
		return nil
	}
	sorted := slices.Sorted(slices.Values(digests))
	want := make(map[string]bool, len(sorted))
	for _, d := range sorted {
		want[d] = true
	}
	if rev <= 0 {
		rev = etcdstore.LatestRev
	}
	end := clientv3.GetPrefixRangeEnd(prefixOf(sorted[len(sorted)-1]))
	p := etcdstore.NewRangePager(cli.KV, prefixOf(sorted[0]), end, rev, sweepRangeLimit)
	if keysOnly {
		p.KeysOnly()
	}
	for {
		kvs, _, err := p.Next(ctx)
		if err != nil || len(kvs) == 0 {
			return err
		}
		skip := ""
		for _, kv := range kvs {
			d, ok := digestOfKey(string(kv.Key), prefixOf)
			if !ok || !want[d] || d == skip {
				continue
			}
			done, err := fn(d, kv.Value)
			if err != nil {
				return err
			}
			if done {
				skip = d
			}
		}
		if d, ok := digestOfKey(string(kvs[len(kvs)-1].Key), prefixOf); ok && d == skip {
			p.SkipTo(clientv3.GetPrefixRangeEnd(prefixOf(d)))
		}
	}
}

// digestOfKey returns the digest whose prefix (made by prefixOf) key lies
// under. Every per-digest prefix is "<root><escaped digest>/", so the root
// is found from any digest's prefix.
func digestOfKey(key string, prefixOf func(string) string) (string, bool) {
	root := strings.TrimSuffix(prefixOf(""), "/")
	rest, ok := strings.CutPrefix(key, root)
	if !ok {
		return "", false
	}
	esc, _, ok := strings.Cut(rest, "/")
	if !ok {
		return "", false
	}
	d, err := url.PathUnescape(esc)
	return d, err == nil
}

// refsInventory retains the digests that a recorded reference names: the
// references of every reference object the gateway saw written (and of
// writes in flight), and those the rebuild found.
type refsInventory struct {
	cli  *clientv3.Client
	keys etcdstore.Keys
	rev  int64
}

func (refsInventory) Name() string { return "references" }

func (i refsInventory) Retained(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	out, err := digestsWithKeys(ctx, i.cli, i.rev, digestsOf(blobs), i.keys.Refs)
	if err != nil {
		return nil, fmt.Errorf("read references: %w", err)
	}
	return out, nil
}

// digestsWithKeys returns the digests among digests that have a key under
// the prefix prefixOf makes, read at revision rev: one count of each
// digest's keys, sweepTxnOps of them to a transaction. A count is answered
// from etcd's index alone, without reading a key or a value, so that a
// digest with many keys costs little more than one with a single key. A
// read at a given revision is served by the member asked without a quorum
// round (serializable): what a revision holds never changes, and a member
// that has not applied it yet refuses the read rather than answering from
// an older one.
func digestsWithKeys(ctx context.Context, cli *clientv3.Client, rev int64, digests []string, prefixOf func(string) string) (map[string]bool, error) {
	out := map[string]bool{}
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev), clientv3.WithSerializable())
	}
	for start := 0; start < len(digests); start += sweepTxnOps {
		group := digests[start:min(start+sweepTxnOps, len(digests))]
		ops := make([]clientv3.Op, len(group))
		for n, d := range group {
			ops[n] = clientv3.OpGet(prefixOf(d), opts...)
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, err
		}
		for n, r := range resp.Responses {
			if rr := r.GetResponseRange(); rr != nil && rr.Count > 0 {
				out[group[n]] = true
			}
		}
	}
	return out, nil
}

// trashInventory retains the digests of deleted reference objects until
// their trash expires on both the wall and the elapsed clock
// (trashExpired), so that a restore finds its blobs.
type trashInventory struct {
	cli     *clientv3.Client
	keys    etcdstore.Keys
	rev     int64
	now     time.Time
	elapsed time.Duration
}

func (trashInventory) Name() string { return "trash" }

func (i trashInventory) Retained(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	out := map[string]bool{}
	err := digestRange(ctx, i.cli, i.rev, digestsOf(blobs), i.keys.TrashRefs, false, func(d string, v []byte) (bool, error) {
		var tr etcdstore.TrashRef
		if err := etcdstore.DecodeRecord(etcdstore.TrashRefRecord, d, v, &tr); errors.Is(err, etcdstore.ErrNewerRecord) {
			return false, err
		} else if err != nil || !trashExpired(tr.Expires, tr.ExpiresElapsed, i.now, i.elapsed) {
			// An entry that does not decode retains too: a missing input
			// keeps.
			out[d] = true
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read trash references: %w", err)
	}
	return out, nil
}

// placementsInventory retains blobs being written: a placement younger
// than the grace (a write in flight through a gateway, or the record of
// its latest finished write, which may have left the stored copy and its
// modification time as they were), and a blob whose backend copy is
// younger than the grace (a write just finished, or one made around the
// gateway). An older placement of a write in flight is the leftover of a
// gateway that died; it is counted in stale. Older placements are pruned
// by the pass.
type placementsInventory struct {
	cli   *clientv3.Client
	keys  etcdstore.Keys
	rev   int64
	now   time.Time
	grace time.Duration
	stale *int64
}

func (placementsInventory) Name() string { return "placements" }

func (i placementsInventory) Retained(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	out := map[string]bool{}
	for _, b := range blobs {
		if i.young(b.Modified) {
			out[b.Digest] = true
		}
	}
	err := digestRange(ctx, i.cli, i.rev, digestsOf(blobs), i.keys.Placements, false, func(d string, v []byte) (bool, error) {
		var p etcdstore.Placement
		if err := etcdstore.DecodeRecord(etcdstore.PlacementRecord, d, v, &p); errors.Is(err, etcdstore.ErrNewerRecord) {
			return false, err
		} else if err != nil || i.young(p.At) {
			out[d] = true
			return true, nil
		}
		if !p.Written {
			*i.stale++
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read placements: %w", err)
	}
	return out, nil
}

// young reports whether t is within the grace of now. An unknown time, or
// one in the future, is young: a missing input keeps.
func (i placementsInventory) young(t time.Time) bool {
	return t.IsZero() || i.now.Sub(t) < i.grace
}

// uploadsInventory retains the blobs that a multipart upload in flight on
// the backend is writing again. It asks about each blob alone, with the
// blob's key as the listing prefix: MinIO lists only the uploads of exactly
// that object for a prefix (and lists a whole bucket from a cache that
// misses uploads), S3 lists the key's own uploads first. The sweep asks it
// only about the blobs that no other inventory retains and whose tombstone
// is pending or ready (see uploadsAhead), so it costs a request per blob
// that a pass may make ready, not per stored blob.
//
// The backend cannot be read at the pass's revision, so each page's
// listings prove themselves: the reference revisions of the page's shards
// are read before and after them, and listings during which one moved are
// made again; a page that cannot be proven in a few tries retires the
// inventory for the pass.
type uploadsInventory struct {
	s3       Backend
	cli      *clientv3.Client
	keys     etcdstore.Keys
	parallel int
}

// uploadProofTries bounds the listings made to prove one page.
const uploadProofTries = 3

func (uploadsInventory) Name() string { return "uploads" }

func (i uploadsInventory) Retained(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	if len(blobs) == 0 {
		return map[string]bool{}, nil
	}
	shards := map[string]bool{}
	for _, b := range blobs {
		shards[etcdstore.RefShard(b.Digest)] = true
	}
	for range uploadProofTries {
		before, err := i.refRevs(ctx, shards)
		if err != nil {
			return nil, err
		}
		out, err := i.list(ctx, blobs)
		if err != nil {
			return nil, err
		}
		after, err := i.refRevs(ctx, shards)
		if err != nil {
			return nil, err
		}
		if after == before {
			return out, nil
		}
	}
	return nil, fmt.Errorf("%w: references moved during each of %d listings of multipart uploads into %s",
		errRetired, uploadProofTries, blobs[0].Bucket)
}

// refRevs returns the highest reference revision among shards, reading
// only the keys from the first of them to the last.
func (i uploadsInventory) refRevs(ctx context.Context, shards map[string]bool) (int64, error) {
	sorted := slices.Sorted(maps.Keys(shards))
	first, last := i.keys.RefRev(sorted[0]), i.keys.RefRev(sorted[len(sorted)-1])
	resp, err := i.cli.Get(ctx, first, clientv3.WithRange(last+"\x00"), clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("read reference revisions: %w", err)
	}
	var top int64
	for _, kv := range resp.Kvs {
		if sh, ok := etcdstore.LastSegment(string(kv.Key)); ok && shards[sh] {
			top = max(top, kv.ModRevision)
		}
	}
	return top, nil
}

// list returns the digests of blobs that a multipart upload is writing,
// asking about a few blobs at once.
func (i uploadsInventory) list(ctx context.Context, blobs []Blob) (map[string]bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		found = make([]bool, len(blobs))
		errs  = make([]error, len(blobs))
		sem   = make(chan struct{}, max(1, i.parallel))
	)
	for n, b := range blobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			found[n], errs[n] = i.s3.UploadInFlight(ctx, b.Bucket, b.Key)
			if errs[n] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	out := map[string]bool{}
	for n, b := range blobs {
		if errs[n] != nil {
			return nil, fmt.Errorf("list multipart uploads of %s/%s: %w", b.Bucket, b.Key, errs[n])
		}
		if found[n] {
			out[b.Digest] = true
		}
	}
	return out, nil
}

// digestsOf returns the digests of blobs.
func digestsOf(blobs []Blob) []string {
	out := make([]string, len(blobs))
	for i, b := range blobs {
		out[i] = b.Digest
	}
	return out
}
