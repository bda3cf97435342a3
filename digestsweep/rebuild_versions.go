package digestsweep

import (
	"context"

	"github.com/sweepgate/sweepgate/cas"
	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/s3client"
)

// A reference object in a versioned bucket is every stored version of its
// key: a version stays restorable (GET ?versionId, or a copy of it made
// current) for as long as it is stored, so what it names must stay stored
// too. The record of such a key keeps the union of what its stored
// versions name; a delete marker names nothing and hides nothing from the
// rebuild, which lists versions rather than objects in such a bucket.
// Reading a listed key's bodies and settling its record is
// digests.RecordChecker's, which the Service also uses after a delete.

// keyPage is one page of a rebuild's listing: its keys, and where the
// listing goes on.
type keyPage struct {
	s3client.ObjectPage
	keys []digests.ListedKey
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
			page.keys = append(page.keys, digests.VersionedKey(vp.Versions[i].Key, vp.Versions[i:j]))
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
	page := keyPage{ObjectPage: op, keys: make([]digests.ListedKey, len(op.Objects))}
	for i, o := range op.Objects {
		page.keys[i] = digests.ListedKey{Key: o.Key, ETag: o.ETag, Size: o.Size}
	}
	page.Objects = nil
	return page, nil
}
