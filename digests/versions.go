package digests

import (
	"context"
	"time"

	"github.com/sweepgate/sweepgate/etcdstore"
	"github.com/sweepgate/sweepgate/s3client"
)

// In a bucket that may hold versions, a reference object's record keeps
// what every stored version of its key names (see refcheck.go): a
// write adds the new version's digests and removes none, and a delete
// (a delete marker, or one version removed) leaves the record to the
// versions still stored, read again from the backend.

// committed returns how a write that stored its body is recorded: in a
// bucket that keeps the older versions, as a version added to them; when
// the bucket's versioning cannot be read, as unknown, which keeps both
// bodies' digests until the rebuild reads the key. In a suspended bucket
// the write replaced the key's null version, whose digests may be named by
// no stored version now: settle says to read the versions again.
func (s *Service) committed(ctx context.Context, bucket, key string) (outcome etcdstore.WriteOutcome, settle bool) {
	v, err := s.s3.Versioning(ctx, bucket)
	switch {
	case err != nil:
		s.logFor(ctx).Warn("bucket versioning unknown: the write's record keeps both bodies until the rebuild settles it", "bucket", bucket, "key", key, "err", err)
		return etcdstore.WriteUnknown, false
	case v == s3client.VersioningEnabled:
		return etcdstore.WriteCommittedVersion, false
	case v == s3client.VersioningSuspended:
		return etcdstore.WriteCommittedVersion, true
	default:
		return etcdstore.WriteCommitted, false
	}
}

// settleDeleted decides, after a delete of bucket/key whose references
// went to the trash at deletedAt, answered a (or stopped by err), whether
// they come back: when the backend did not delete the object, or, in a
// bucket that may hold versions, while any version of the key is stored.
func (s *Service) settleDeleted(ctx context.Context, bucket, key string, version bool, a *s3client.Answer, err error, deletedAt time.Time) {
	if err == nil && a.DefiniteFailure() {
		s.restoreTrash(ctx, bucket, key, deletedAt)
		return
	}
	if v, verr := s.s3.Versioning(ctx, bucket); verr == nil && !v.MayHoldVersions() {
		if s.stillThere(ctx, bucket, key, version, a, err) {
			s.restoreTrash(ctx, bucket, key, deletedAt)
		}
		return
	}
	s.settleVersionsDeleted(ctx, bucket, key, deletedAt)
}

// settleVersionsDeleted settles the record of bucket/key, whose references
// went to the trash at deletedAt, after a delete in a bucket that may hold
// versions. When a version is still stored the references come back and
// the record is settled to what the stored versions name (settleVersions);
// when none is, they stay in the trash like any deleted object's.
func (s *Service) settleVersionsDeleted(ctx context.Context, bucket, key string, deletedAt time.Time) {
	vs, err := s.s3.KeyVersions(ctx, bucket, key)
	if err == nil && !anyStored(vs) {
		return
	}
	s.restoreTrash(ctx, bucket, key, deletedAt)
	s.settleVersions(ctx, bucket, key, vs, err)
}

// settleVersions settles the record of bucket/key to what its stored
// versions vs (listed, or failed to list with listErr) name, read now.
// Whatever cannot be read leaves every recorded digest kept and the record
// dirty, for the rebuild to settle.
func (s *Service) settleVersions(ctx context.Context, bucket, key string, vs []s3client.ObjectVersion, listErr error) {
	log := s.logFor(ctx).With("bucket", bucket, "key", key)
	if err := s.store.MarkDirty(ctx, bucket, key, s.now()); err != nil {
		log.Error("record of a versioned reference object not marked for the rebuild; its references are kept", "err", err)
		return
	}
	src := s.layout.Source(bucket, key)
	if listErr != nil || src == nil {
		log.Warn("versions of a reference object not read; the rebuild settles its record", "err", listErr)
		return
	}
	c := &RecordChecker{Backend: s.s3, Store: s.store, Logger: log, Now: s.now}
	if _, err := c.Check(ctx, src, VersionedKey(key, vs)); err != nil {
		log.Warn("versions of a reference object not read; the rebuild settles its record", "err", err)
	}
}

// anyStored reports whether vs holds a version that is not a delete marker.
func anyStored(vs []s3client.ObjectVersion) bool {
	for _, v := range vs {
		if !v.DeleteMarker {
			return true
		}
	}
	return false
}
