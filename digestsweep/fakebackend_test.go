package digestsweep

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sweepgate/sweepgate/s3client"
)

// fakeBackend is an in-memory Backend for the unit tests: a map of objects
// with ETags, and injected faults on the calls the collector's decisions
// hang on. It starts no process and never sleeps.
type fakeBackend struct {
	mu sync.Mutex
	// objects is bucket -> key -> object.
	objects map[string]map[string]fakeObject
	// uploads holds "bucket/key" of the multipart uploads in flight.
	uploads map[string]bool

	// deleteFails names keys a DeleteObjects answer reports failing, with
	// their S3 code: the request finished and those keys stay.
	deleteFails map[string]string
	// deleteLost executes the DeleteObjects request and then loses its
	// answer: the keys are gone but the caller gets an error.
	deleteLost bool
	// deleteErr fails a DeleteObjects request before the backend executes
	// it: nothing is deleted and the caller gets the error.
	deleteErr error
	// headErr makes Head of a key fail (existence unknown); uploadErr
	// makes UploadInFlight of a key fail.
	headErr   map[string]error
	uploadErr map[string]error

	// deleteCalls records the keys of every DeleteObjects request sent,
	// deadlines the deadline of its context (zero: none).
	deleteCalls [][]string
	deadlines   []time.Time
}

type fakeObject struct {
	data []byte
	etag string
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{objects: map[string]map[string]fakeObject{}, uploads: map[string]bool{},
		deleteFails: map[string]string{}, headErr: map[string]error{}, uploadErr: map[string]error{}}
}

// put stores data under bucket/key with its MD5 as ETag, as S3 does for a
// single-part object.
func (f *fakeBackend) put(bucket, key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.objects[bucket] == nil {
		f.objects[bucket] = map[string]fakeObject{}
	}
	sum := md5.Sum(data)
	f.objects[bucket][key] = fakeObject{data: data, etag: `"` + hex.EncodeToString(sum[:]) + `"`}
}

// has reports whether bucket/key is stored.
func (f *fakeBackend) has(bucket, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.objects[bucket][key]
	return ok
}

func (f *fakeBackend) ListObjects(ctx context.Context, bucket, prefix, startAfter string, max int) (s3client.ObjectPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	objs, ok := f.objects[bucket]
	if !ok {
		return s3client.ObjectPage{}, s3client.ErrNoSuchBucket
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range objs {
			if strings.HasPrefix(k, prefix) && k > startAfter && !yield(k) {
				return
			}
		}
	})
	page := s3client.ObjectPage{Done: len(keys) <= max}
	if !page.Done {
		keys = keys[:max]
	}
	for _, k := range keys {
		o := objs[k]
		page.Objects = append(page.Objects, s3client.Object{Key: k, Size: int64(len(o.data)), ETag: o.etag})
	}
	if len(keys) > 0 {
		page.Next = keys[len(keys)-1]
	}
	return page, nil
}

func (f *fakeBackend) ListObjectsNext(ctx context.Context, bucket, prefix string, prev s3client.ObjectPage, max int) (s3client.ObjectPage, error) {
	return f.ListObjects(ctx, bucket, prefix, prev.Next, max)
}

func (f *fakeBackend) Head(ctx context.Context, bucket, key string) (s3client.ObjectInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.headErr[key]; err != nil {
		return s3client.ObjectInfo{}, err
	}
	o, ok := f.objects[bucket][key]
	if !ok {
		return s3client.ObjectInfo{}, s3client.ErrNoSuchKey
	}
	return s3client.ObjectInfo{Size: int64(len(o.data)), ETag: o.etag}, nil
}

func (f *fakeBackend) Get(ctx context.Context, bucket, key string, opt s3client.GetOptions, limit int64) ([]byte, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[bucket][key]
	switch {
	case !ok:
		return nil, "", s3client.ErrNoSuchKey
	case opt.IfMatch != "" && strings.Trim(opt.IfMatch, `"`) != strings.Trim(o.etag, `"`):
		return nil, "", &s3client.Error{Status: 412, Code: "PreconditionFailed"}
	case int64(len(o.data)) > limit:
		return nil, "", s3client.ErrTooLarge
	}
	return slices.Clone(o.data), o.etag, nil
}

func (f *fakeBackend) DeleteObjects(ctx context.Context, bucket string, keys []string) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleteCalls = append(f.deleteCalls, slices.Clone(keys))
	dl, _ := ctx.Deadline()
	f.deadlines = append(f.deadlines, dl)
	if f.deleteErr != nil {
		return nil, f.deleteErr
	}
	failed := map[string]string{}
	for _, k := range keys {
		if code, ok := f.deleteFails[k]; ok {
			failed[k] = code
			continue
		}
		delete(f.objects[bucket], k)
	}
	if f.deleteLost {
		return nil, errors.New("fake: connection reset while reading the answer")
	}
	return failed, nil
}

func (f *fakeBackend) Versioning(ctx context.Context, bucket string) (s3client.Versioning, error) {
	return s3client.VersioningNever, nil
}

func (f *fakeBackend) ListVersions(ctx context.Context, bucket, prefix, keyMarker string, max int) (s3client.VersionPage, error) {
	page, err := f.ListObjects(ctx, bucket, prefix, keyMarker, max)
	if err != nil {
		return s3client.VersionPage{}, err
	}
	out := s3client.VersionPage{Next: page.Next, Done: page.Done}
	for _, o := range page.Objects {
		out.Versions = append(out.Versions, s3client.ObjectVersion{Key: o.Key, VersionID: "null", ETag: o.ETag, Size: o.Size})
	}
	return out, nil
}

func (f *fakeBackend) KeyVersions(ctx context.Context, bucket, key string) ([]s3client.ObjectVersion, error) {
	info, err := f.Head(ctx, bucket, key)
	if errors.Is(err, s3client.ErrNoSuchKey) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []s3client.ObjectVersion{{Key: key, VersionID: "null", ETag: info.ETag, Size: info.Size}}, nil
}

func (f *fakeBackend) UploadInFlight(ctx context.Context, bucket, key string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.uploadErr[key]; err != nil {
		return false, err
	}
	return f.uploads[bucket+"/"+key], nil
}

var _ Backend = (*fakeBackend)(nil)
