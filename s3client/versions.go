package s3client

import (
	"context"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// Versioning is a bucket's versioning state as GetBucketVersioning answers
// it.
type Versioning string

// The versioning states. A bucket that was never versioned answers none;
// once enabled, a bucket is never unversioned again, only suspended, and a
// suspended bucket still stores the versions it made while enabled.
const (
	VersioningNever     Versioning = ""
	VersioningEnabled   Versioning = "Enabled"
	VersioningSuspended Versioning = "Suspended"
)

// MayHoldVersions reports whether a bucket in state v may store more than
// one version of a key.
func (v Versioning) MayHoldVersions() bool { return v != VersioningNever }

// Versioning returns bucket's versioning state.
func (c *Client) Versioning(ctx context.Context, bucket string) (Versioning, error) {
	body, err := c.call(ctx, http.MethodGet, bucket, "", url.Values{"versioning": {""}}, nil)
	if err != nil {
		return VersioningNever, fmt.Errorf("get versioning of %s: %w", bucket, err)
	}
	var doc struct {
		XMLName xml.Name `xml:"VersioningConfiguration"`
		Status  string   `xml:"Status"`
	}
	if err := xml.Unmarshal(body, &doc); err != nil {
		return VersioningNever, fmt.Errorf("get versioning of %s: %w", bucket, err)
	}
	switch v := Versioning(doc.Status); v {
	case VersioningNever, VersioningEnabled, VersioningSuspended:
		return v, nil
	default:
		return VersioningNever, fmt.Errorf("get versioning of %s: unknown status %q", bucket, doc.Status)
	}
}

// ObjectVersion is one version of a key, or a delete marker.
type ObjectVersion struct {
	Key          string
	VersionID    string
	ETag         string
	Size         int64
	DeleteMarker bool
}

// VersionPage is one page of a version listing. Versions holds the versions
// and delete markers of whole keys only: a key whose versions the backend
// split across pages is listed whole on the page it starts on.
type VersionPage struct {
	Versions []ObjectVersion
	// Next is the last key of the page, to start the following page after;
	// Done says there is none.
	Next string
	Done bool
}

// ListVersions returns the versions and delete markers of the keys of
// bucket under prefix that sort after keyMarker ("" for the beginning),
// about max versions to a page.
func (c *Client) ListVersions(ctx context.Context, bucket, prefix, keyMarker string, max int) (VersionPage, error) {
	raw, err := c.listVersions(ctx, bucket, prefix, keyMarker, "", max)
	if err != nil {
		return VersionPage{}, err
	}
	page := VersionPage{Versions: raw.versions, Done: !raw.truncated}
	if raw.truncated {
		// The last key's versions may go on in the next page: list it whole.
		last := raw.versions[len(raw.versions)-1].Key
		rest, err := c.KeyVersions(ctx, bucket, last)
		if err != nil {
			return VersionPage{}, err
		}
		page.Versions = append(page.Versions[:firstOf(raw.versions, last)], rest...)
	}
	if n := len(page.Versions); n > 0 {
		page.Next = page.Versions[n-1].Key
	}
	return page, nil
}

// firstOf returns the index of the first version of key in vs (sorted by
// key).
func firstOf(vs []ObjectVersion, key string) int {
	for i, v := range vs {
		if v.Key == key {
			return i
		}
	}
	return len(vs)
}

// KeyVersions returns every version and delete marker of exactly key.
func (c *Client) KeyVersions(ctx context.Context, bucket, key string) ([]ObjectVersion, error) {
	var all []ObjectVersion
	keyMarker, versionMarker := "", ""
	for {
		raw, err := c.listVersions(ctx, bucket, key, keyMarker, versionMarker, 1000)
		if err != nil {
			return nil, err
		}
		for _, v := range raw.versions {
			if v.Key == key {
				all = append(all, v)
			}
		}
		if !raw.truncated || raw.nextKey != key {
			// Past key: the listing has moved on to longer keys.
			return all, nil
		}
		if raw.nextVersion == "" || raw.nextVersion == versionMarker {
			return nil, fmt.Errorf("list versions of %s/%s: truncated page that does not move forward", bucket, key)
		}
		keyMarker, versionMarker = raw.nextKey, raw.nextVersion
	}
}

// rawVersions is one answer of ListObjectVersions, keys decoded, versions
// in key order.
type rawVersions struct {
	versions             []ObjectVersion
	truncated            bool
	nextKey, nextVersion string
}

func (c *Client) listVersions(ctx context.Context, bucket, prefix, keyMarker, versionMarker string, max int) (rawVersions, error) {
	q := url.Values{"versions": {""}, "encoding-type": {"url"}, "max-keys": {strconv.Itoa(max)}}
	if prefix != "" {
		q.Set("prefix", prefix)
	}
	if keyMarker != "" {
		q.Set("key-marker", keyMarker)
	}
	if versionMarker != "" {
		q.Set("version-id-marker", versionMarker)
	}
	body, err := c.call(ctx, http.MethodGet, bucket, "", q, nil)
	if err != nil {
		return rawVersions{}, fmt.Errorf("list versions of %s/%s: %w", bucket, prefix, err)
	}
	var doc listVersionsResult
	if err := xml.Unmarshal(body, &doc); err != nil {
		return rawVersions{}, fmt.Errorf("list versions of %s/%s: %w", bucket, prefix, err)
	}
	decode := keyDecoder(doc.EncodingType)
	out := rawVersions{truncated: doc.IsTruncated, nextVersion: doc.NextVersionIDMarker}
	if out.nextKey, err = decode(doc.NextKeyMarker); err != nil {
		return rawVersions{}, fmt.Errorf("list versions of %s: next key %q: %w", bucket, doc.NextKeyMarker, err)
	}
	for _, e := range doc.Entries {
		if e.XMLName.Local != "Version" && e.XMLName.Local != "DeleteMarker" {
			continue // Name, Prefix, MaxKeys and the like
		}
		key, err := decode(e.Key)
		if err != nil {
			return rawVersions{}, fmt.Errorf("list versions of %s: key %q: %w", bucket, e.Key, err)
		}
		out.versions = append(out.versions, ObjectVersion{
			Key: key, VersionID: e.VersionID, ETag: UnquoteETag(e.ETag), Size: e.Size,
			DeleteMarker: e.XMLName.Local == "DeleteMarker",
		})
	}
	if out.truncated && len(out.versions) == 0 {
		return rawVersions{}, fmt.Errorf("list versions of %s/%s: truncated page with no versions", bucket, prefix)
	}
	return out, nil
}

// listVersionsResult is a ListObjectVersions answer. Versions and delete
// markers are read in document order.
type listVersionsResult struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	EncodingType        string   `xml:"EncodingType"`
	IsTruncated         bool     `xml:"IsTruncated"`
	NextKeyMarker       string   `xml:"NextKeyMarker"`
	NextVersionIDMarker string   `xml:"NextVersionIdMarker"`
	Entries             []struct {
		XMLName   xml.Name
		Key       string `xml:"Key"`
		VersionID string `xml:"VersionId"`
		ETag      string `xml:"ETag"`
		Size      int64  `xml:"Size"`
	} `xml:",any"`
}
