package digests

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/s3client"
)

// A reference object in a versioned bucket is every stored version of its
// key: a version stays restorable (GET ?versionId, or a copy of it made
// current) for as long as it is stored, so what it names must stay stored
// too. The record of such a key keeps the union of what its stored
// versions name; a delete marker names nothing and hides nothing from the
// rebuild, which lists versions rather than objects in such a bucket.

// listedKey is one key of a rebuild's listing page.
type listedKey struct {
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

// keyPage is one page of a rebuild's listing: its keys, and where the
// listing goes on.
type keyPage struct {
	s3client.ObjectPage
	keys []listedKey
}

// list lists the page of src at pos (continuing cont when set): objects,
// or the versions of whole keys where src's bucket may hold versions. A
// content namespace's blobs are listed as objects: a blob's key names its
// content, so its versions name the same digests.
func (b *Rebuilder) list(ctx context.Context, src *cas.Source, pos RebuildPos, cont *s3client.ObjectPage, batch int) (keyPage, error) {
	versioned := false
	if src.Kind != cas.KindContent {
		v, err := b.Backend.Versioning(ctx, src.Bucket)
		if err != nil {
			return keyPage{}, err
		}
		versioned = v.MayHoldVersions()
	}
	if versioned {
		vp, err := b.Backend.ListVersions(ctx, src.Bucket, src.Prefix, pos.After, batch)
		if err != nil {
			return keyPage{}, err
		}
		page := keyPage{ObjectPage: s3client.ObjectPage{Next: vp.Next, Done: vp.Done}}
		for i := 0; i < len(vp.Versions); {
			j := i
			for j < len(vp.Versions) && vp.Versions[j].Key == vp.Versions[i].Key {
				j++
			}
			page.keys = append(page.keys, versionedKey(vp.Versions[i].Key, vp.Versions[i:j]))
			i = j
		}
		return page, nil
	}
	var op s3client.ObjectPage
	var err error
	if cont != nil {
		op, err = b.Backend.ListObjectsNext(ctx, src.Bucket, src.Prefix, *cont, batch)
	} else {
		op, err = b.Backend.ListObjects(ctx, src.Bucket, src.Prefix, pos.After, batch)
	}
	if err != nil {
		return keyPage{}, err
	}
	page := keyPage{ObjectPage: op, keys: make([]listedKey, len(op.Objects))}
	for i, o := range op.Objects {
		page.keys[i] = listedKey{Key: o.Key, ETag: o.ETag, Size: o.Size}
	}
	page.Objects = nil
	return page, nil
}

// versionedKey is key with its versions vs (delete markers included).
func versionedKey(key string, vs []s3client.ObjectVersion) listedKey {
	h := sha256.New()
	k := listedKey{Key: key, versioned: true, Versions: vs}
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
func (b *Rebuilder) read(ctx context.Context, src *cas.Source, o listedKey, limit int64) ([]string, string, int64, error) {
	if !o.versioned {
		body, etag, err := b.Backend.Get(ctx, src.Bucket, o.Key, s3client.GetOptions{}, limit)
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
		body, _, err := b.Backend.Get(ctx, src.Bucket, o.Key, s3client.GetOptions{VersionID: v.VersionID}, limit)
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
