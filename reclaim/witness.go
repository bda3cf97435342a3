package reclaim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// etcd restored from a snapshot. Every record in etcd (sessions, references,
// guards, tombstones, marks) goes back in time while the backend does not,
// so a record that kept something live may be gone and a mark may be older
// than what a client did since. The restore witness detects it: a small
// record {epoch, seq} with one copy in etcd (etcdstore.Keys.Witness) and
// one on the backend (Config.WitnessBucket, WitnessKey). The leader
// advances it on its guard-check timer and at the start of every pass:
// first etcd's copy, in a fenced compare-and-put, then, only once that
// landed, the backend's. So the backend's copy is never ahead of etcd's
// unless etcd lost writes it had acknowledged; a leader that reads the
// backend's seq ahead of etcd's (or the backend's copy of an epoch etcd
// does not hold) records the restore mark (etcdstore.Restored) in the same
// fenced transaction that moves etcd's copy past the backend's.
//
// While the mark stands, no pass deletes: the upload sweep plans and
// reports but marks and aborts nothing and does not run the reconciler;
// the digest sweep rebuilds, judges and reports but its collector does not
// run. The leader clears the mark at the start of a pass once every live
// gateway's clock record was written after the mark, and a complete
// rebuild (every reference source read) started after the mark. The mark
// record stays, cleared: its Rev is the revision at or below which a
// session's record may come from the snapshot (see restoreFloor in
// inventory.go).
//
// What it cannot see: writes etcd lost that were made after the last
// advance before the snapshot and before the next one (a snapshot taken
// less than one Config.GuardCheck before etcd stopped taking writes, or
// while no leader ran), since then both copies agree.

// DefaultWitnessKeyPrefix is where, in the witness bucket, the backend's
// copy of the witness is kept when reclaim.witness_key is empty: this
// prefix, a slash, and the etcd prefix without its slashes at either end
// (so that deployments with different etcd prefixes sharing a bucket keep
// apart).
const DefaultWitnessKeyPrefix = ".sweepgate-witness"

// DefaultWitnessKey returns the backend key of the witness of a deployment
// whose etcd prefix is prefix.
func DefaultWitnessKey(prefix string) string {
	p := strings.Trim(prefix, "/")
	if p == "" {
		p = "root"
	}
	return DefaultWitnessKeyPrefix + "/" + p
}

// witnessMaxBody bounds the backend copy read: the record is a few dozen
// bytes.
const witnessMaxBody = 4096

// judgeWitness compares etcd's copy of the witness (nil: none, or one that
// does not decode) with the backend's (nil: none, or one that does not
// decode). It returns why etcd lost writes, or "" when nothing shows it.
// A backend copy proves something only when present: without one nothing
// is compared (it is written anew).
func judgeWitness(etcd, backend *etcdstore.Witness) string {
	switch {
	case backend == nil:
		return ""
	case etcd == nil:
		return fmt.Sprintf("etcd holds no restore witness but the backend's copy is at epoch %s seq %d: etcd lost the record (restored from a snapshot taken before it existed, or its keys were removed)",
			backend.Epoch, backend.Seq)
	case etcd.Epoch != backend.Epoch:
		return fmt.Sprintf("etcd's restore witness is of epoch %s but the backend's copy of epoch %s (seq %d): etcd lost the record it advanced",
			etcd.Epoch, backend.Epoch, backend.Seq)
	case backend.Seq > etcd.Seq:
		return fmt.Sprintf("the backend's copy of the restore witness is at seq %d, ahead of etcd's seq %d (epoch %s): etcd lost %d acknowledged advance(s), so it was restored from a snapshot",
			backend.Seq, etcd.Seq, etcd.Epoch, backend.Seq-etcd.Seq)
	}
	return ""
}

// nextWitness is the witness a round writes: etcd's copy advanced by one,
// past the backend's after a detection, or a new epoch when neither copy
// exists.
func nextWitness(etcd, backend *etcdstore.Witness) etcdstore.Witness {
	switch {
	case etcd == nil && backend == nil:
		return etcdstore.Witness{Epoch: newEpoch(), Seq: 1}
	case etcd == nil:
		return etcdstore.Witness{Epoch: backend.Epoch, Seq: backend.Seq + 1}
	case backend != nil && backend.Epoch != etcd.Epoch:
		return etcdstore.Witness{Epoch: backend.Epoch, Seq: max(etcd.Seq, backend.Seq) + 1}
	case backend != nil:
		return etcdstore.Witness{Epoch: etcd.Epoch, Seq: max(etcd.Seq, backend.Seq) + 1}
	}
	return etcdstore.Witness{Epoch: etcd.Epoch, Seq: etcd.Seq + 1}
}

func newEpoch() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// defaultWitnessBucket is the bucket of the backend's copy when
// Config.WitnessBucket is empty: the bucket of the first content-addressed
// namespace (sweepgate's own), else the first of Config.Buckets as
// configured; "" when there is neither, and the witness is off. A bucket
// the backend lists is never chosen by itself: the object would show in a
// client's listing and keep the client from removing its bucket.
func defaultWitnessBucket(cfg *Config) string {
	switch {
	case cfg.Digests != nil && cfg.Digests.Layout != nil && len(cfg.Digests.Layout.Namespaces) > 0:
		return cfg.Digests.Layout.Namespaces[0].Bucket
	case len(cfg.Buckets) > 0:
		return cfg.Buckets[0]
	}
	return ""
}

// witnessRead is one reading of both copies of the witness.
type witnessRead struct {
	bucket, key   string
	etcd, backend *etcdstore.Witness
	// rev is the etcd revision etcd's copy was read at, modRev its mod
	// revision (0: none); etcdBad says etcd holds a copy that does not
	// decode, which proves nothing either way.
	rev, modRev int64
	etcdBad     bool
}

// readWitness reads etcd's copy, then the backend's. A copy that does not
// decode counts as none (logged): it proves nothing either way. A failed
// read is an error: nothing can be said. With the witness off (no bucket)
// the backend's copy is none.
func (r *Reclaimer) readWitness(ctx context.Context) (witnessRead, error) {
	wr := witnessRead{bucket: r.cfg.WitnessBucket, key: r.cfg.WitnessKey}
	if wr.key == "" {
		wr.key = DefaultWitnessKey(r.keys().Root())
	}
	resp, err := r.cli().Get(ctx, r.keys().Witness())
	if err != nil {
		return wr, fmt.Errorf("read etcd's restore witness: %w", err)
	}
	wr.rev = resp.Header.Revision
	if len(resp.Kvs) > 0 {
		wr.modRev = resp.Kvs[0].ModRevision
		w, err := etcdstore.UnmarshalWitness(string(resp.Kvs[0].Key), resp.Kvs[0].Value)
		switch {
		case err == nil:
			wr.etcd = &w
		case errors.Is(err, etcdstore.ErrNewerRecord):
			return wr, err // a newer release's witness is never written anew
		default:
			wr.etcdBad = true
			r.log.Warn("etcd's restore witness does not decode; it is written anew", "err", err)
		}
	}
	if wr.bucket == "" {
		return wr, nil
	}
	body, _, err := r.s3.Get(ctx, wr.bucket, wr.key, s3client.GetOptions{}, witnessMaxBody)
	switch {
	case errors.Is(err, s3client.ErrNoSuchKey):
	case err != nil:
		return wr, fmt.Errorf("read the backend's restore witness %s/%s: %w", wr.bucket, wr.key, err)
	default:
		w, err := etcdstore.UnmarshalWitness(wr.bucket+"/"+wr.key, body)
		switch {
		case err == nil:
			wr.backend = &w
		case errors.Is(err, etcdstore.ErrNewerRecord):
			return wr, err
		default:
			r.log.Warn("the backend's restore witness does not decode; it is written anew", "bucket", wr.bucket, "key", wr.key, "err", err)
		}
	}
	return wr, nil
}

// advanceWitness runs one round of the witness under term t: read both
// copies, record the restore mark when they show etcd lost writes, advance
// etcd's copy (fenced, compared with the copy read), then write the
// backend's. It returns the mark it recorded, or nil. A failed round
// changes at most etcd's copy, which only runs ahead: safe.
func (r *Reclaimer) advanceWitness(ctx context.Context, t term) (*etcdstore.Restored, error) {
	wr, err := r.readWitness(ctx)
	if err != nil {
		return nil, err
	}
	if wr.bucket == "" {
		// The witness is off (New logged it): nowhere to keep the
		// backend's copy.
		return nil, nil
	}
	next := nextWitness(wr.etcd, wr.backend)
	next.At, next.Term = r.now().UTC(), t.N
	key := r.keys().Witness()
	cmp := clientv3.Compare(clientv3.ModRevision(key), "=", wr.modRev)
	ops := []clientv3.Op{clientv3.OpPut(key, etcdstore.MarshalWitness(next))}
	var mark *etcdstore.Restored
	if why := judgeWitness(wr.etcd, wr.backend); why != "" && !wr.etcdBad {
		mark = &etcdstore.Restored{Rev: wr.rev, Reason: why, Etcd: wr.etcd, Backend: *wr.backend,
			DetectedAt: r.now().UTC(), Term: t.N, By: r.cfg.ID}
		ops = append(ops, clientv3.OpPut(r.keys().Restored(), etcdstore.MarshalRestored(*mark)))
	}
	if _, err := fencedTxn(ctx, r.cli(), t, []clientv3.Cmp{cmp}, ops...); err != nil {
		if errors.Is(err, errChanged) {
			return nil, fmt.Errorf("etcd's restore witness changed while it was advanced (another leader's round); not written to the backend: %w", err)
		}
		return nil, fmt.Errorf("advance etcd's restore witness: %w", err)
	}
	if mark != nil {
		r.metrics.setRestored(true)
		r.log.Error("etcd was restored from a snapshot: no pass deletes anything until every gateway has published its clock again and a rebuild started after this mark has finished",
			"reason", mark.Reason, "revision", mark.Rev, "term", t.N, "witness_bucket", wr.bucket, "witness_key", wr.key)
	}
	body := []byte(etcdstore.MarshalWitness(next))
	if _, err := r.s3.PutSmall(ctx, wr.bucket, wr.key, body, "application/json"); err != nil {
		return mark, fmt.Errorf("write the backend's restore witness %s/%s: %w", wr.bucket, wr.key, err)
	}
	return mark, nil
}

// witnessTick is the leader timer's round of the witness; a failure is
// logged and counted, and the next tick tries again. A dry-run reclaimer
// writes nothing.
func (r *Reclaimer) witnessTick(l *Leadership) error {
	if r.cfg.DryRun {
		return nil
	}
	ctx, cancel := context.WithTimeout(l.Context(), r.cfg.BackendTimeout)
	defer cancel()
	_, err := r.advanceWitness(ctx, termOf(l))
	if err != nil {
		r.metrics.witnessFailures.Inc()
		r.log.Warn("restore witness not advanced; trying again", "err", err)
	}
	return err
}
