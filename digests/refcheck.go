package digests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// RecordChecker compares one reference object on the backend with its
// record and settles the record to what the object's bodies name. Both
// halves of digest reclamation settle a record this way: the Service
// after a delete in a bucket that may hold versions (versions.go), and
// the sweep's rebuild for every object it lists (digestsweep.Rebuilder).
// It lives on the request side because the sweep may import this package
// and this package may not import the sweep; what it reads and writes is
// the record the Service keeps.
//
// A reference object in a versioned bucket is every stored version of its
// key: a version stays restorable (GET ?versionId, or a copy of it made
// current) for as long as it is stored, so what it names must stay stored
// too. The record of such a key keeps the union of what its stored
// versions name; a delete marker names nothing.
type RecordChecker struct {
	Backend RecordBackend
	Store   *etcdstore.Store
	// Stale is how old a pending write must be before it is taken to be
	// from a gateway that died and its record made dirty;
	// etcdstore.StalePendingAfter when 0.
	Stale  time.Duration
	Logger *slog.Logger // nil discards
	Now    func() time.Time
}

// RecordBackend is the S3 calls a RecordChecker makes.
// *s3client.Client is the one implementation outside tests.
type RecordBackend interface {
	// Get reads an object whole, at most limit bytes (s3client.ErrTooLarge
	// past it), with its ETag; a missing object is s3client.ErrNoSuchKey.
	Get(ctx context.Context, bucket, key string, opt s3client.GetOptions, limit int64) ([]byte, string, error)
	// KeyVersions returns every version and delete marker of exactly key.
	KeyVersions(ctx context.Context, bucket, key string) ([]s3client.ObjectVersion, error)
}

var _ RecordBackend = (*s3client.Client)(nil)

const (
	// checkAttempts bounds how often one object is compared again because
	// its record changed while its body was read.
	checkAttempts = 3
	// defaultStale is how old a pending write must be before it is taken
	// to be from a gateway that died, when no limit is set. A write
	// outlives its request by no more than the backend timeout, far below.
	defaultStale = etcdstore.StalePendingAfter
)

// CheckResult is what Check found for one object.
type CheckResult struct {
	Read        int64 // bodies read (no record, ETag differs, or dirty)
	Unknown     int64 // 1 when the gateway had not recorded the object's references: a producer writing around it
	UnknownRefs int64 // references added for it
	Settled     int64 // 1 when a dirty record was settled by reading the body
	Stale       int64 // 1 when a pending write older than the stale limit was turned into a dirty record
}

// ListedKey is one reference object as the backend listed it: a key of a
// rebuild's listing page, or a key whose versions were just read. A
// ListedKey literal is an unversioned object; VersionedKey makes a key
// whose record keeps what each of its stored versions names.
type ListedKey struct {
	Key string
	// ETag identifies what the record was taken from: the object's ETag,
	// or for a versioned key a digest of its stored versions' ids and ETags.
	ETag string
	// Size is the object's size, or the largest stored version's.
	Size int64
	// versioned says Versions lists every version of the key, and the
	// record must keep what each stored one names.
	versioned bool
	Versions  []s3client.ObjectVersion
}

// Check compares one listed object of src with its record, settles the
// record to what the object's body names when they differ (adding the
// references the gateway did not record, and alerting on them), and
// returns what it found. An object it cannot account for (too large, too
// many digests, a failed read) is an error: what that object references
// is unknown. In a versioned bucket the object is every stored version of
// its key, and the record keeps what any of them names.
func (c *RecordChecker) Check(ctx context.Context, src *cas.Source, o ListedKey) (CheckResult, error) {
	var d CheckResult
	limit := src.MaxBody
	if limit <= 0 {
		limit = cas.DefaultMaxBody
	}
	for attempt := range checkAttempts {
		if attempt > 0 && o.versioned {
			// The key may have gained or lost versions since it was listed.
			vs, err := c.Backend.KeyVersions(ctx, src.Bucket, o.Key)
			if err != nil {
				return d, fmt.Errorf("list versions of reference object %s/%s: %w", src.Bucket, o.Key, err)
			}
			o = VersionedKey(o.Key, vs)
		}
		rec, modRev, err := c.record(ctx, src.Bucket, o.Key)
		if err != nil {
			return d, err
		}
		if rec != nil && rec.Pending != nil {
			return d, c.pending(ctx, src, o.Key, rec.Pending, &d)
		}
		if rec != nil && !rec.Dirty && rec.ETag == o.ETag {
			return d, nil // the recorded body is the one listed
		}
		if o.Size > limit && src.Kind == cas.KindContent {
			return d, nil // too large to be a manifest: it names nothing
		}
		if o.Size > limit {
			return d, fmt.Errorf("reference object %s/%s is %d bytes, over the parse limit of %d: its references cannot be known", src.Bucket, o.Key, o.Size, limit)
		}
		digests, etag, reads, err := c.read(ctx, src, o, limit)
		d.Read += reads
		switch {
		case errors.Is(err, s3client.ErrNoSuchKey) && o.versioned:
			continue // a version went since the listing: list the key again
		case errors.Is(err, s3client.ErrNoSuchKey):
			// Deleted since the listing: through the gateway, its record
			// went to the trash; around it, its references are not needed.
			return d, nil
		case err != nil:
			return d, err
		}
		if o.versioned && rec == nil && len(digests) == 0 {
			return d, nil // no stored version names anything
		}

		// A gateway write between the record's read and the body's may
		// have made the body older than the record; settling a dirty
		// record to an older body would drop references the backend may
		// hold. So the record must be as it was, or the object is looked
		// at again.
		again, againRev, err := c.record(ctx, src.Bucket, o.Key)
		if err != nil {
			return d, err
		}
		if againRev != modRev {
			continue
		}
		if again != nil && !again.Dirty && again.ETag == etag {
			return d, nil // the listing was older than the record
		}
		added, err := c.Store.RecordFoundRefs(ctx, src.Bucket, o.Key, digests, etag, modRev, c.clock())
		if errors.Is(err, etcdstore.ErrConflict) {
			continue // the record changed after the body was read
		}
		if errors.Is(err, etcdstore.ErrWriteInFlight) {
			// A write began just now; its end records its body, and the
			// next rebuild looks again.
			return d, nil
		}
		if err != nil {
			return d, fmt.Errorf("record references of %s/%s: %w", src.Bucket, o.Key, err)
		}
		if again != nil && again.Dirty {
			d.Settled++
		}
		if len(added) > 0 {
			d.Unknown++
			d.UnknownRefs += int64(len(added))
			c.logger().Warn("references written around the gateway: a producer the gateway does not know about",
				"source", src.Name, "bucket", src.Bucket, "key", o.Key, "digests", len(added))
		}
		return d, nil
	}
	return d, fmt.Errorf("reference record of %s/%s changed during each of %d reads: %w", src.Bucket, o.Key, checkAttempts, etcdstore.ErrConflict)
}

// pending handles a record with a write in flight. The write's own end
// settles a live one; only a write older than the stale limit, from a
// gateway that died before ending it, is made dirty. It is settled by the
// next rebuild rather than now, so that a gateway that is merely slow has
// its body on the backend before it is read.
func (c *RecordChecker) pending(ctx context.Context, src *cas.Source, key string, w *etcdstore.RefWrite, d *CheckResult) error {
	stale := c.Stale
	if stale <= 0 {
		stale = defaultStale
	}
	now := c.clock()
	age := now.Sub(w.At)
	if age <= stale {
		return nil
	}
	if err := c.Store.EndRefWrite(ctx, src.Bucket, key, w.ID, etcdstore.WriteUnknown, "", now); err != nil {
		return fmt.Errorf("end stale write %s of %s/%s: %w", w.ID, src.Bucket, key, err)
	}
	d.Stale++
	c.logger().Warn("rebuild: a reference write never ended; its gateway died, so the record is dirty until the next rebuild reads the body",
		"source", src.Name, "bucket", src.Bucket, "key", key, "write", w.ID, "age", age)
	return nil
}

// record reads the record of bucket/key: nil and revision 0 when there is
// none.
func (c *RecordChecker) record(ctx context.Context, bucket, key string) (*etcdstore.RefSource, int64, error) {
	v, err := c.Store.GetRefSource(ctx, bucket, key)
	if errors.Is(err, etcdstore.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read reference record of %s/%s: %w", bucket, key, err)
	}
	return &v.Value, v.ModRev, nil
}

func (c *RecordChecker) clock() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *RecordChecker) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// VersionedKey is key with its versions vs (delete markers included).
func VersionedKey(key string, vs []s3client.ObjectVersion) ListedKey {
	h := sha256.New()
	k := ListedKey{Key: key, versioned: true, Versions: vs}
	for _, v := range vs {
		if v.DeleteMarker {
			continue
		}
		fmt.Fprintf(h, "%s %s\n", v.VersionID, v.ETag)
		k.Size = max(k.Size, v.Size)
	}
	k.ETag = "versions-" + hex.EncodeToString(h.Sum(nil))[:32]
	return k
}

// read reads what o names: its body, or the bodies of all its stored
// versions. It returns the digests, the ETag the record keeps, and how many
// bodies it read. A version or object gone since the listing is
// s3client.ErrNoSuchKey.
func (c *RecordChecker) read(ctx context.Context, src *cas.Source, o ListedKey, limit int64) ([]string, string, int64, error) {
	if !o.versioned {
		body, etag, err := c.Backend.Get(ctx, src.Bucket, o.Key, s3client.GetOptions{}, limit)
		if err != nil {
			return nil, "", 0, readError(src, o.Key, limit, err)
		}
		digests, err := src.Extract(body)
		if err != nil {
			return nil, "", 1, fmt.Errorf("reference object %s/%s: %w", src.Bucket, o.Key, err)
		}
		return digests, etag, 1, nil
	}
	var all []string
	var reads int64
	for _, v := range o.Versions {
		if v.DeleteMarker {
			continue
		}
		body, _, err := c.Backend.Get(ctx, src.Bucket, o.Key, s3client.GetOptions{VersionID: v.VersionID}, limit)
		if err != nil {
			return nil, "", reads, readError(src, o.Key+" version "+v.VersionID, limit, err)
		}
		reads++
		digests, err := src.Extract(body)
		if err != nil {
			return nil, "", reads, fmt.Errorf("reference object %s/%s version %s: %w", src.Bucket, o.Key, v.VersionID, err)
		}
		all = append(all, digests...)
	}
	return slices.Compact(slices.Sorted(slices.Values(all))), o.ETag, reads, nil
}

// readError describes a failed read of a reference object; a missing one
// stays s3client.ErrNoSuchKey.
func readError(src *cas.Source, what string, limit int64, err error) error {
	switch {
	case errors.Is(err, s3client.ErrNoSuchKey):
		return err
	case errors.Is(err, s3client.ErrTooLarge):
		return fmt.Errorf("reference object %s/%s is over the parse limit of %d bytes: its references cannot be known: %w", src.Bucket, what, limit, err)
	default:
		return fmt.Errorf("read reference object %s/%s: %w", src.Bucket, what, err)
	}
}
