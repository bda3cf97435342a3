package reclaim

import (
	"context"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"

	"github.com/sweepgate/sweepgate/digests"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// digestBackend makes the digest sweep's backend calls (digests.Backend)
// with the reclaimer's S3 client, mapping its answers to the ones the
// sweep acts on.
type digestBackend struct{ c s3 }

var _ digests.Backend = digestBackend{}

// digestErr maps the S3 client's sentinel answers to the sweep's.
func digestErr(err error) error {
	switch {
	case errors.Is(err, errNoSuchBucket):
		return digests.ErrNoSuchBucket
	case errors.Is(err, errNoSuchKey):
		return digests.ErrNoSuchKey
	case errors.Is(err, errTooLarge):
		return digests.ErrTooLarge
	}
	return err
}

func (b digestBackend) ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (digests.ObjectPage, error) {
	p, err := b.c.listObjects(ctx, bucket, prefix, startAfter, max)
	if err != nil {
		return digests.ObjectPage{}, digestErr(err)
	}
	page := digests.ObjectPage{Next: p.Next, Done: p.Done, Objects: make([]digests.Object, len(p.Objects))}
	for i, o := range p.Objects {
		page.Objects[i] = digests.Object{Key: o.Key, Size: o.Size, ETag: o.ETag, Modified: o.Modified}
	}
	return page, nil
}

func (b digestBackend) HeadObject(ctx context.Context, bucket, key string) (digests.ObjectInfo, error) {
	info, err := b.c.headObject(ctx, bucket, key)
	return digests.ObjectInfo{Size: info.Size, ETag: info.ETag}, digestErr(err)
}

func (b digestBackend) GetObject(ctx context.Context, bucket, key string, limit int64) ([]byte, string, error) {
	body, etag, err := b.c.getObject(ctx, bucket, key, limit)
	return body, etag, digestErr(err)
}

func (b digestBackend) DeleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error) {
	failed, err := b.c.deleteObjects(ctx, bucket, keys)
	return failed, digestErr(err)
}

func (b digestBackend) UploadInFlight(ctx context.Context, bucket, key string) (bool, error) {
	ok, err := b.c.uploadInFlight(ctx, bucket, key)
	return ok, digestErr(err)
}

// uploadInFlight reports whether the backend has a multipart upload of
// exactly bucket/key. The key's own uploads sort before those of longer
// keys it prefixes, so the first entry answers.
func (c s3) uploadInFlight(ctx context.Context, bucket, key string) (bool, error) {
	q := url.Values{"uploads": {""}, "encoding-type": {"url"}, "prefix": {key}, "max-uploads": {"1"}}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q)
	if errors.Is(err, errNoSuchBucket) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var res listUploadsResult
	if err := xml.Unmarshal(body, &res); err != nil {
		return false, err
	}
	for _, u := range res.Uploads {
		k := u.Key
		if res.EncodingType == "url" {
			if k, err = url.QueryUnescape(u.Key); err != nil {
				return false, err
			}
		}
		if k == key {
			return true, nil
		}
	}
	return false, nil
}

// digestMetrics counts the digest sweep's series (digests.SweepMetrics)
// in the reclaimer's metrics.
type digestMetrics struct{ m *metrics }

func (d *digestMetrics) UnknownRefs(n int64)       { d.m.unknownRefs.Add(float64(n)) }
func (d *digestMetrics) BreakerRefused()           { d.m.digestRefusals.Inc() }
func (d *digestMetrics) Deleted(blobs, size int64) { d.m.digestDeleted(blobs, size) }

func (d *digestMetrics) Tombstones(counts map[etcdstore.TombstoneState]int64) {
	for _, st := range etcdstore.AllTombstoneStates {
		d.m.tombstones.WithLabelValues(string(st)).Set(float64(counts[st]))
	}
}
