package etcdstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// DefaultPrefix is the key prefix when none is configured.
const DefaultPrefix = "/sweepgate/"

// Keys builds the etcd keys of sweepgate's records; its methods are the
// key layout. Every key lives under Prefix so that several gateways, or other
// applications, can share one etcd cluster without touching each other's
// keys, and so that one range scan covers all of sweepgate's state.
//
// Variable parts of a key (bucket names, upload IDs) are path-escaped, so a
// '/' inside one can never make a key of one record a prefix of another's.
type Keys struct {
	// Prefix is the common prefix. Methods treat a missing trailing '/' as
	// present and an empty Prefix as DefaultPrefix; NewKeys checks it.
	Prefix string
}

// NewKeys returns Keys for prefix after checking and normalizing it (a
// trailing '/' is added when missing).
func NewKeys(prefix string) (Keys, error) {
	if prefix == "" {
		return Keys{}, errors.New("etcdstore: key prefix is empty; use a dedicated prefix such as " + DefaultPrefix)
	}
	if strings.ContainsRune(prefix, 0) {
		return Keys{}, fmt.Errorf("etcdstore: key prefix %q contains a NUL byte", prefix)
	}
	return Keys{Prefix: Keys{Prefix: prefix}.Root()}, nil
}

// Root returns the normalized prefix, ending in '/'. A range over Root covers
// every sweepgate key.
func (k Keys) Root() string {
	p := k.Prefix
	if p == "" {
		return DefaultPrefix
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

// Sessions returns the prefix of all upload sessions in bucket.
func (k Keys) Sessions(bucket string) string {
	return k.Root() + "sessions/" + url.PathEscape(bucket) + "/"
}

// Session returns the key of one multipart upload session.
func (k Keys) Session(bucket, uploadID string) string {
	return k.Sessions(bucket) + url.PathEscape(uploadID)
}

// Parts returns the prefix of all part records of one upload.
func (k Keys) Parts(uploadID string) string {
	return k.AllParts() + url.PathEscape(uploadID) + "/"
}

// Part returns the key of one part record. The part number is zero-padded to
// five digits (S3 allows 1 to 10000) so that a range scan returns parts in
// numeric order, which CompleteMultipartUpload and ListParts need.
func (k Keys) Part(uploadID string, partNumber int) string {
	return fmt.Sprintf("%s%05d", k.Parts(uploadID), partNumber)
}

// Activity returns the key that records an upload's latest client activity
// (a part started, parts listed). It is separate from the session so that
// parallel parts of one upload never conflict with each other: they all
// compare the session and write here.
func (k Keys) Activity(uploadID string) string {
	return k.Root() + "activity/" + url.PathEscape(uploadID)
}

// InFlight returns the prefix of an upload's parts in flight, under a
// lease of the gateway serving them, so that a gateway that dies stops
// keeping the upload alive: in keyspace schema 1 one record per
// UploadPart or UploadPartCopy streaming to the backend; from schema 2 one
// per gateway with parts of the upload in flight, which lingers for
// multipart.PartLinger after the last of them ended. While any exists the
// reclaimer neither marks nor deletes the upload.
func (k Keys) InFlight(uploadID string) string {
	return k.Root() + "inflight/" + url.PathEscape(uploadID) + "/"
}

// InFlightPart returns the key of one part in flight of an upload.
func (k Keys) InFlightPart(uploadID, id string) string {
	return k.InFlight(uploadID) + url.PathEscape(id)
}

// Idempotency returns the key of a recorded outcome for an idempotency key.
func (k Keys) Idempotency(id string) string {
	return k.Root() + "idem/" + url.PathEscape(id)
}

// AllSessions returns the prefix of every session in every bucket.
func (k Keys) AllSessions() string {
	return k.Root() + "sessions/"
}

// CompleteAttempt returns the key that marks a CompleteMultipartUpload in
// flight on the backend. It lives under a lease of the gateway that sends the
// complete, so it vanishes if that gateway dies, and while it exists no
// other complete of the upload is sent.
func (k Keys) CompleteAttempt(uploadID string) string {
	return k.Root() + "completing/" + url.PathEscape(uploadID)
}

// Schema returns the key of the keyspace's schema record (SchemaRecord):
// the schema the stored state is in. A keyspace without one is in schema
// 1, the schema of every release before a migration first wrote it.
func (k Keys) Schema() string {
	return k.Root() + "schema"
}

// Migration returns the key of the migration record: the schema migration
// in progress, or the last one finished, and how far it got (package
// migrate).
func (k Keys) Migration() string {
	return k.Root() + "migration"
}

// AllParts returns the prefix of every part record of every upload.
func (k Keys) AllParts() string {
	return k.Root() + "parts/"
}

// Gateways returns the prefix of the gateways' published clocks.
func (k Keys) Gateways() string {
	return k.Root() + "gateways/"
}

// Gateway returns the key where the gateway process id publishes its clock
// with its liveness: the key lives under that process's lease, so it is
// gone soon after the process is.
func (k Keys) Gateway(id string) string {
	return k.Gateways() + url.PathEscape(id)
}

// ElapsedClock returns the key of the reclaimer's elapsed clock: the time
// its leaders have measured on their monotonic clocks, added up.
func (k Keys) ElapsedClock() string {
	return k.Root() + "reclaim/clock"
}

// The keys of digest reclamation (docs/digests.md). A digest is
// written "<algorithm>:<hex>"; path escaping leaves it as it is, so the
// references of one digest, its trash references and its placements each
// form one range, and ranges sort in digest order.

// AllRefs returns the prefix of every recorded reference.
func (k Keys) AllRefs() string { return k.Root() + "refs/" }

// Refs returns the prefix of the references to digest.
func (k Keys) Refs(digest string) string { return k.AllRefs() + url.PathEscape(digest) + "/" }

// Ref returns the key of the reference that the object bucket/key holds to
// digest.
func (k Keys) Ref(digest, bucket, key string) string {
	return k.Refs(digest) + url.PathEscape(bucket) + "/" + url.PathEscape(key)
}

// ParseRef returns the digest of a key made by Ref.
func (k Keys) ParseRef(key string) (digest string, ok bool) {
	rest, ok := strings.CutPrefix(key, k.AllRefs())
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

// AllRefSources returns the prefix of every reference object's record.
func (k Keys) AllRefSources() string { return k.Root() + "refsrc/" }

// RefSources returns the prefix of the reference object records of bucket.
func (k Keys) RefSources(bucket string) string {
	return k.AllRefSources() + url.PathEscape(bucket) + "/"
}

// RefSource returns the key of the record of the digests that the object
// bucket/key names, from which an overwrite or delete undoes them.
func (k Keys) RefSource(bucket, key string) string {
	return k.RefSources(bucket) + url.PathEscape(key)
}

// RefShards is how many reference revision shards there are: one per first
// hex digit of a digest.
const RefShards = 16

// RefShard returns the shard of digest: the first hex digit of its value.
func RefShard(digest string) string {
	_, hex, _ := strings.Cut(digest, ":")
	if hex == "" {
		return "0"
	}
	return hex[:1]
}

// AllRefShards lists every shard name, in key order.
func AllRefShards() []string {
	out := make([]string, 0, RefShards)
	for _, c := range "0123456789abcdef" {
		out = append(out, string(c))
	}
	return out
}

// RefRevs returns the prefix of the reference revision shards.
func (k Keys) RefRevs() string { return k.Root() + "refrev/" }

// RefRev returns the key of one reference revision shard. Every write that
// adds or moves a reference, a trash entry or a placement of a digest puts
// this key for the digest's shard; its mod revision is the shard's
// reference revision, which a verdict about the digest carries and the
// writes made from that verdict compare.
func (k Keys) RefRev(shard string) string { return k.RefRevs() + shard }

// RefHolds returns the prefix of reference holds: while any exists, no guard
// can be armed (a complete of a multipart upload into a reference source
// holds until its references are recorded).
func (k Keys) RefHolds() string { return k.Root() + "refholds/" }

// RefHold returns the key of one reference hold.
func (k Keys) RefHold(id string) string { return k.RefHolds() + url.PathEscape(id) }

// Unrecorded returns the prefix of the records of completed reference
// objects whose references are not recorded (UnrecordedWrite).
func (k Keys) Unrecorded() string { return k.Root() + "unrecorded/" }

// UnrecordedOf returns the key of the record of the complete id.
func (k Keys) UnrecordedOf(id string) string { return k.Unrecorded() + url.PathEscape(id) }

// AllTrash returns the prefix of every trash record.
func (k Keys) AllTrash() string { return k.Root() + "trash/" }

// TrashOf returns the prefix of the trash records of bucket ("" for all) or
// of one object when key is not empty.
func (k Keys) TrashOf(bucket, key string) string {
	if bucket == "" {
		return k.AllTrash()
	}
	p := k.AllTrash() + url.PathEscape(bucket) + "/"
	if key != "" {
		p += url.PathEscape(key) + "/"
	}
	return p
}

// timeKey writes t so that keys sort in time order.
func timeKey(t time.Time) string { return fmt.Sprintf("%020d", t.UnixNano()) }

// Trash returns the key of the trash record of the object bucket/key
// deleted at deletedAt.
func (k Keys) Trash(bucket, key string, deletedAt time.Time) string {
	return k.TrashOf(bucket, key) + timeKey(deletedAt)
}

// AllTrashRefs returns the prefix of every trash reference.
func (k Keys) AllTrashRefs() string { return k.Root() + "trashrefs/" }

// TrashRefs returns the prefix of the trash references to digest.
func (k Keys) TrashRefs(digest string) string {
	return k.AllTrashRefs() + url.PathEscape(digest) + "/"
}

// TrashRef returns the key of the trash reference that a deleted object
// holds to digest until its trash expires.
func (k Keys) TrashRef(digest, bucket, key string, deletedAt time.Time) string {
	return k.TrashRefs(digest) + url.PathEscape(bucket) + "/" + url.PathEscape(key) + "/" + timeKey(deletedAt)
}

// AllPlacements returns the prefix of every placement.
func (k Keys) AllPlacements() string { return k.Root() + "placements/" }

// Placements returns the prefix of the placements of digest: writes of its
// blob in flight through a gateway.
func (k Keys) Placements(digest string) string {
	return k.AllPlacements() + url.PathEscape(digest) + "/"
}

// Placement returns the key of one placement.
func (k Keys) Placement(digest, id string) string { return k.Placements(digest) + url.PathEscape(id) }

// Tombstones returns the prefix of every reclamation tombstone.
func (k Keys) Tombstones() string { return k.Root() + "tombstones/" }

// Tombstone returns the key of digest's reclamation tombstone.
func (k Keys) Tombstone(digest string) string { return k.Tombstones() + url.PathEscape(digest) }

// Guards returns the prefix of every armed guard.
func (k Keys) Guards() string { return k.Root() + "guards/" }

// Guard returns the key of digest's guard, armed around the delete of its
// bytes.
func (k Keys) Guard(digest string) string { return k.Guards() + url.PathEscape(digest) }

// Frontiers returns the prefix of every plane's frontier.
func (k Keys) Frontiers() string { return k.Root() + "frontiers/" }

// Frontier returns the key of the revision that plane has applied.
func (k Keys) Frontier(plane string) string { return k.Frontiers() + url.PathEscape(plane) }

// LastSegment returns the unescaped last '/'-separated segment of key, such
// as the digest of a tombstone or guard key.
func LastSegment(key string) (string, bool) {
	i := strings.LastIndexByte(key, '/')
	s, err := url.PathUnescape(key[i+1:])
	return s, err == nil
}

// ShardBuckets returns the prefix of the shard directory: one key per
// bucket whose state some shard holds, valued with that shard's name. It
// lives in the default shard only (package shards).
func (k Keys) ShardBuckets() string { return k.Root() + "shards/buckets/" }

// ShardBucket returns the directory key of bucket.
func (k Keys) ShardBucket(bucket string) string { return k.ShardBuckets() + url.PathEscape(bucket) }

// ShardMoves returns the prefix of the records of bucket moves in progress
// (sweepgate shards move), in the default shard.
func (k Keys) ShardMoves() string { return k.Root() + "shards/moves/" }

// ShardMove returns the move record of bucket.
func (k Keys) ShardMove(bucket string) string { return k.ShardMoves() + url.PathEscape(bucket) }
