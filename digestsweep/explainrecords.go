package digestsweep

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
	"github.com/sweepgate/sweepgate/sweep"
)

// inventoryDetail says what one inventory found about blob b, from the
// records the explanation read, with the values it compared.
func (ex *DigestExplanation) inventoryDetail(name string, kept bool, b Blob, young placementsInventory, refs, trash, places int64) (string, sweep.Values) {
	switch name {
	case "references":
		v := sweep.Values{"references": refs, "shard": ex.Shard, "shard_ref_revision": ex.ShardRefRevision}
		if !kept {
			return "no recorded reference names it", v
		}
		names := make([]string, 0, 3)
		for _, ref := range ex.References[:min(3, len(ex.References))] {
			n := ref.Bucket + "/" + ref.Key
			if ref.Source != "" {
				n += " (" + ref.Source + ")"
			}
			names = append(names, n)
		}
		more := ""
		if int(refs) > len(names) {
			more = fmt.Sprintf(" and %d more", int(refs)-len(names))
		}
		return fmt.Sprintf("named by %d recorded reference(s): %s%s", refs, strings.Join(names, ", "), more), v
	case "trash":
		var live int
		var latest time.Time
		for _, tr := range ex.Trash {
			if !tr.Expired {
				live++
			}
			if tr.Expires.After(latest) {
				latest = tr.Expires
			}
		}
		v := sweep.Values{"entries": trash, "unexpired": live, "latest_expiry": nil, "now": ex.Now}
		if !latest.IsZero() {
			v["latest_expiry"] = latest
		}
		switch {
		case kept:
			return fmt.Sprintf("a deleted reference object's trash names it until %s", latest.Format(time.RFC3339)), v
		case trash > 0:
			return fmt.Sprintf("its %d trash entr(ies) expired, the latest at %s", trash, latest.Format(time.RFC3339)), v
		}
		return "no trash entry names it", v
	case "placements":
		age := ex.Now.Sub(b.Modified)
		v := sweep.Values{"modified": b.Modified, "age": sweep.RoundSecond(age), "placement_grace": young.grace.String(),
			"young_blob": young.young(b.Modified), "placements": places}
		youngPlaced := 0
		for _, p := range ex.Placements {
			if !p.Stale {
				youngPlaced++
			}
		}
		v["young_placements"] = youngPlaced
		switch {
		case youngPlaced > 0:
			return fmt.Sprintf("%d write(s) of the blob are in flight through a gateway (placements younger than %s)", youngPlaced, young.grace), v
		case young.young(b.Modified):
			return fmt.Sprintf("stored %s ago, within the placement grace %s: a write may have just finished, or one around the gateway", age.Round(time.Second), young.grace), v
		case kept:
			return "a placement retains it", v
		}
		return fmt.Sprintf("stored %s ago, past the placement grace %s, and no write of it is in flight", age.Round(time.Second), young.grace), v
	case "uploads":
		v := sweep.Values{"bucket": b.Bucket, "key": b.Key}
		if kept {
			return fmt.Sprintf("a multipart upload into %s/%s is in flight on the backend", b.Bucket, b.Key), v
		}
		return fmt.Sprintf("no multipart upload into %s/%s is in flight", b.Bucket, b.Key), v
	}
	if kept {
		return "retained by " + name, sweep.Values{}
	}
	return "not retained by " + name, sweep.Values{}
}

// explainRefs reads the references to ex.Digest, with their objects'
// records, and returns how many there are.
func (sw *Sweep) explainRefs(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (int64, error) {
	keys := sw.keys()
	prefix := keys.Refs(ex.Digest)
	resp, err := sw.cli().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("digestsweep: read references: %w", err)
	}
	for _, kv := range resp.Kvs {
		parts, ok := unescapeSegments(strings.TrimPrefix(string(kv.Key), prefix), 2)
		if !ok {
			continue
		}
		ref := ExplainRef{Bucket: parts[0], Key: parts[1]}
		var v etcdstore.Ref
		if etcdstore.DecodeKV(etcdstore.RefRecord, kv, &v) == nil {
			ref.At = v.At
		}
		if src := sw.cfg.Layout.Source(ref.Bucket, ref.Key); src != nil {
			ref.Source = src.Name
		} else if ns, _, ok := sw.cfg.Layout.Namespace(ref.Bucket, ref.Key); ok && ns.Content != "" {
			// A manifest stored as a blob: it keeps what it names while
			// it is stored itself.
			ref.Source = "content of " + ns.Name
		}
		switch rec, err := sw.store.GetRefSource(ctx, ref.Bucket, ref.Key); {
		case err == nil:
			ref.Pending, ref.Dirty, ref.Restored, ref.Unknown = rec.Value.Pending != nil, rec.Value.Dirty, rec.Value.Restored, rec.Value.Unknown
		case !errors.Is(err, etcdstore.ErrNotFound):
			return 0, err
		}
		ex.References = append(ex.References, ref)
	}
	return resp.Count, nil
}

// explainTrash reads the trash entries naming ex.Digest and returns how
// many there are.
func (sw *Sweep) explainTrash(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (int64, error) {
	keys := sw.keys()
	prefix := keys.TrashRefs(ex.Digest)
	resp, err := sw.cli().Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("digestsweep: read trash references: %w", err)
	}
	for _, kv := range resp.Kvs {
		parts, ok := unescapeSegments(strings.TrimPrefix(string(kv.Key), prefix), 3)
		if !ok {
			continue
		}
		ns, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		tr := ExplainTrash{Bucket: parts[0], Key: parts[1], DeletedAt: time.Unix(0, ns).UTC()}
		var v etcdstore.TrashRef
		if etcdstore.DecodeKV(etcdstore.TrashRefRecord, kv, &v) == nil {
			tr.Expires = v.Expires
		}
		// As the trash inventory judges it: retained until it expires on
		// both clocks.
		tr.Expired = trashExpired(v.Expires, v.ExpiresElapsed, ex.Now, ex.elapsed)
		switch rec, err := sw.store.GetTrash(ctx, tr.Bucket, tr.Key, tr.DeletedAt); {
		case err == nil:
			tr.Principal = rec.Value.Principal
		case !errors.Is(err, etcdstore.ErrNotFound):
			return 0, err
		}
		ex.Trash = append(ex.Trash, tr)
	}
	return resp.Count, nil
}

// explainPlacements reads the placements of ex.Digest and returns how many
// there are.
func (sw *Sweep) explainPlacements(ctx context.Context, ex *DigestExplanation, young placementsInventory, at clientv3.OpOption) (int64, error) {
	keys := sw.keys()
	resp, err := sw.cli().Get(ctx, keys.Placements(ex.Digest), clientv3.WithPrefix(), clientv3.WithLimit(maxExplainList), at)
	if err != nil {
		return 0, fmt.Errorf("digestsweep: read placements: %w", err)
	}
	for _, kv := range resp.Kvs {
		id, _ := etcdstore.LastSegment(string(kv.Key))
		var p etcdstore.Placement
		_ = etcdstore.DecodeKV(etcdstore.PlacementRecord, kv, &p) // one that does not decode is young: it retains
		ex.Placements = append(ex.Placements, ExplainPlacement{ID: id, Bucket: p.Bucket, Key: p.Key, At: p.At,
			Age: sweep.RoundSecond(ex.Now.Sub(p.At)), Stale: !young.young(p.At)})
	}
	return resp.Count, nil
}

// explainTombstone reads ex.Digest's tombstone into ex and returns it (nil
// when there is none, or it does not decode, which a note says).
func (sw *Sweep) explainTombstone(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) (*ExplainTombstone, error) {
	resp, err := sw.cli().Get(ctx, sw.keys().Tombstone(ex.Digest), at)
	if err != nil {
		return nil, fmt.Errorf("digestsweep: read tombstone: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	var t etcdstore.Tombstone
	if err := etcdstore.DecodeKV(etcdstore.TombstoneRecord, resp.Kvs[0], &t); err != nil {
		ex.Notes = append(ex.Notes, "its tombstone does not decode ("+err.Error()+"): a pass cannot write over it, so it leaves the digest alone")
		return nil, nil
	}
	ex.Tombstone = &ExplainTombstone{State: string(t.State), Bucket: t.Bucket, Key: t.Key, Size: t.Size, Frontier: t.Frontier,
		RefRev: t.RefRev, Term: t.Term, Pass: t.Pass, Attempts: t.Attempts, Since: t.Since, Reason: t.Reason, ModRevision: resp.Kvs[0].ModRevision}
	return ex.Tombstone, nil
}

// explainGuard reads ex.Digest's guard into ex.
func (sw *Sweep) explainGuard(ctx context.Context, ex *DigestExplanation, at clientv3.OpOption) error {
	resp, err := sw.cli().Get(ctx, sw.keys().Guard(ex.Digest), at)
	if err != nil {
		return fmt.Errorf("digestsweep: read guard: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil
	}
	g, ok := decodeGuard(resp.Kvs[0])
	ex.Guard = &ExplainGuard{Bucket: g.Bucket, Key: g.Key, Term: g.Term, Pass: g.Pass, At: g.At, ModRevision: resp.Kvs[0].ModRevision,
		Undecodable: !ok, Attempt: g.Attempt}
	if g.Attempt != nil {
		until := g.Attempt.Deadline.Add(sw.cfg.GuardSettle + sw.cfg.ClockSkew)
		ex.Guard.SettledAfter = &until
	}
	return nil
}

// unescapeSegments splits the path-escaped, '/'-separated tail of a key
// into n segments.
func unescapeSegments(tail string, n int) ([]string, bool) {
	parts := strings.Split(tail, "/")
	if len(parts) != n {
		return nil, false
	}
	for i, p := range parts {
		s, err := url.PathUnescape(p)
		if err != nil {
			return nil, false
		}
		parts[i] = s
	}
	return parts, true
}

// storedBlob is a stored copy of a blob and the namespace it lies in.
type storedBlob struct {
	Blob
	ns string
}

func explainBlob(ns string, b Blob, now time.Time) ExplainBlob {
	return ExplainBlob{Namespace: ns, Bucket: b.Bucket, Key: b.Key, Size: b.Size, Modified: b.Modified, Age: sweep.RoundSecond(now.Sub(b.Modified))}
}

// findBlobs finds the stored copies of digest in the layout's namespaces,
// as the backend lists them (the listing's time, not a HEAD's, is what the
// sweep measures the placement grace from). A namespace's key pattern
// cannot in general be turned around to make a key from a digest, so it
// looks at the keys the records name (hints) and the usual spellings
// (prefix + hex, prefix + digest) when the namespace's own Digest
// recognises them, and otherwise lists the namespace, up to a bound.
// searched says where it looked, for an explanation that found nothing.
func (sw *Sweep) findBlobs(ctx context.Context, layout *cas.Layout, digest string, hints []Blob) (found []storedBlob, searched string, err error) {
	algo, hex, _ := strings.Cut(digest, ":")
	var where []string
	for i := range layout.Namespaces {
		ns := &layout.Namespaces[i]
		var cands []string
		seen := map[string]bool{}
		add := func(key string) {
			if d, ok := ns.Digest(key); ok && d == digest && !seen[key] {
				seen[key] = true
				cands = append(cands, key)
			}
		}
		for _, h := range hints {
			if h.Bucket == ns.Bucket {
				add(h.Key)
			}
		}
		for _, k := range []string{ns.Prefix + hex, ns.Prefix + digest, ns.Prefix + algo + "/" + hex} {
			add(k)
		}
		if len(cands) == 0 {
			b, ok, note, err := sw.scanNamespace(ctx, ns, digest)
			if err != nil {
				return nil, "", err
			}
			where = append(where, note)
			if ok {
				found = append(found, storedBlob{Blob: b, ns: ns.Name})
			}
			continue
		}
		where = append(where, fmt.Sprintf("namespace %s (%s)", ns.Name, strings.Join(cands, ", ")))
		for _, key := range cands {
			b, ok, err := sw.listedBlob(ctx, ns.Bucket, key)
			if err != nil {
				return nil, "", err
			}
			if ok {
				b.Digest = digest
				found = append(found, storedBlob{Blob: b, ns: ns.Name})
				break
			}
		}
	}
	// The copy the tombstone is about (the first hint) is judged first.
	if len(hints) > 0 {
		for i, f := range found {
			if f.Bucket == hints[0].Bucket && f.Key == hints[0].Key {
				found[0], found[i] = found[i], found[0]
			}
		}
	}
	return found, strings.Join(where, "; "), nil
}

// listedBlob lists bucket with key as the prefix: the key itself sorts
// first among the keys it prefixes, so one entry says whether it is stored.
func (sw *Sweep) listedBlob(ctx context.Context, bucket, key string) (Blob, bool, error) {
	page, err := sw.s3.ListObjects(ctx, bucket, key, "", 1)
	if errors.Is(err, s3client.ErrNoSuchBucket) {
		return Blob{}, false, nil
	}
	if err != nil {
		return Blob{}, false, fmt.Errorf("digestsweep: list %s/%s: %w", bucket, key, err)
	}
	if len(page.Objects) == 0 || page.Objects[0].Key != key {
		return Blob{}, false, nil
	}
	o := page.Objects[0]
	return Blob{Bucket: bucket, Key: o.Key, Size: o.Size, Modified: o.Modified}, true, nil
}

// scanNamespace lists a namespace for a key that carries digest, up to
// maxLocatePages pages.
func (sw *Sweep) scanNamespace(ctx context.Context, ns *cas.Namespace, digest string) (Blob, bool, string, error) {
	after := ""
	for range maxLocatePages {
		page, err := sw.s3.ListObjects(ctx, ns.Bucket, ns.Prefix, after, 1000)
		if errors.Is(err, s3client.ErrNoSuchBucket) {
			return Blob{}, false, fmt.Sprintf("namespace %s (its bucket does not exist)", ns.Name), nil
		}
		if err != nil {
			return Blob{}, false, "", fmt.Errorf("digestsweep: list namespace %s: %w", ns.Name, err)
		}
		for _, o := range page.Objects {
			if d, ok := ns.Digest(o.Key); ok && d == digest {
				return Blob{Digest: digest, Bucket: ns.Bucket, Key: o.Key, Size: o.Size, Modified: o.Modified}, true, "namespace " + ns.Name, nil
			}
		}
		if page.Done {
			return Blob{}, false, "namespace " + ns.Name + " (listed whole)", nil
		}
		after = page.Next
	}
	return Blob{}, false, fmt.Sprintf("namespace %s (the first %d pages of its listing)", ns.Name, maxLocatePages), nil
}

// explainOrder is the rebuild order the next pass judges a tombstone
// decided at revision decided with: a pass that rebuilds before judging
// (its rebuild is due) reads every source after the decision; otherwise
// the last complete rebuild is the proof. As a plan does, it says what a
// pass would do.
func (s *digestSweep) explainOrder(ctx context.Context, decided int64) (rebuildOrder, error) {
	ord := rebuildOrder{decided: decided, rebuilt: math.MaxInt64}
	if len(s.cfg.Layout.RebuildSources()) == 0 {
		return ord, nil
	}
	last, ok, err := s.lastRebuild(ctx)
	if err != nil {
		return ord, err
	}
	if !s.rebuildDueAt(last, ok, s.now) {
		ord.rebuilt = last.Started
	}
	return ord, nil
}
