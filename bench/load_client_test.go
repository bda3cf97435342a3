//go:build bench

package bench

// BenchmarkLoad's clients: the layout of the uploads' parts, the multipart
// uploaders and the small-object clients, and what they measure.

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// loadLayout says what every part of every upload holds.
type loadLayout struct {
	pool               []byte
	partSize, lastSize int64
	// md5s of the window at each slot, as a full part and as a last part.
	fullMD5, lastMD5 [loadSlots][md5.Size]byte
}

func newLoadLayout(partSize int64) *loadLayout {
	l := &loadLayout{partSize: partSize, lastSize: partSize/2 + loadLastExtra}
	l.pool = harness.NewData(7, partSize+(loadSlots-1)*loadGranule).Bytes()
	var wg sync.WaitGroup
	for s := range loadSlots {
		wg.Go(func() {
			off := int64(s) * loadGranule
			l.fullMD5[s] = md5.Sum(l.pool[off : off+l.partSize])
			l.lastMD5[s] = md5.Sum(l.pool[off : off+l.lastSize])
		})
	}
	wg.Wait()
	return l
}

// slot picks the window of part p (0-based) of upload u (splitmix64).
func (l *loadLayout) slot(u, p int) int {
	z := uint64(u)*loadParts + uint64(p) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int((z ^ (z >> 31)) % loadSlots)
}

// part returns the bytes of part p of upload u and their MD5.
func (l *loadLayout) part(u, p int) ([]byte, [md5.Size]byte) {
	s := l.slot(u, p)
	off := int64(s) * loadGranule
	if p == loadParts-1 {
		return l.pool[off : off+l.lastSize], l.lastMD5[s]
	}
	return l.pool[off : off+l.partSize], l.fullMD5[s]
}

func (l *loadLayout) objectSize() int64 { return (loadParts-1)*l.partSize + l.lastSize }

// etag is the multipart ETag of upload u's object: the MD5 of the parts'
// MD5s, a dash and the part count.
func (l *loadLayout) etag(u int) string {
	h := md5.New()
	for p := range loadParts {
		_, sum := l.part(u, p)
		h.Write(sum[:])
	}
	return hex.EncodeToString(h.Sum(nil)) + "-" + strconv.Itoa(loadParts)
}

// latencies collects durations by operation.
type latencies struct {
	mu sync.Mutex
	d  map[string][]time.Duration
}

func (l *latencies) add(op string, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.d == nil {
		l.d = map[string][]time.Duration{}
	}
	l.d[op] = append(l.d[op], d)
}

// stats returns the nearest-rank percentiles of each operation.
func (l *latencies) stats() map[string]loadLatency {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]loadLatency{}
	for op, ds := range l.d {
		s := slices.Clone(ds)
		slices.Sort(s)
		rank := func(p float64) float64 {
			i := max(0, int(math.Ceil(p*float64(len(s))))-1)
			return ms(s[i])
		}
		out[op] = loadLatency{Count: len(s), P50Ms: rank(0.50), P99Ms: rank(0.99), MaxMs: ms(s[len(s)-1])}
	}
	return out
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// faults counts errors and mismatches and keeps the first few of each.
type faults struct {
	mu                  sync.Mutex
	errors, mismatches  int64
	errSample, misMatch []string
	// tooMany is closed when the errors pass loadMaxErrors.
	tooMany chan struct{}
}

func newFaults() *faults { return &faults{tooMany: make(chan struct{})} }

func (f *faults) err(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors++
	if len(f.errSample) < loadErrorSamples {
		f.errSample = append(f.errSample, fmt.Sprintf(format, args...))
	}
	if f.errors == loadMaxErrors {
		close(f.tooMany)
	}
}

func (f *faults) mismatch(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mismatches++
	if len(f.misMatch) < loadErrorSamples {
		f.misMatch = append(f.misMatch, fmt.Sprintf(format, args...))
	}
}

func (f *faults) fill(s *loadSide) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Errors, s.ErrorSamples = f.errors, slices.Clone(f.errSample)
	s.Mismatches, s.MismatchSamples = f.mismatches, slices.Clone(f.misMatch)
}

// loadTarget is one side under load.
type loadTarget struct {
	name   string
	s3     *s3.Client
	bucket string
	lay    *loadLayout
	// uploads is the number of concurrent uploads.
	uploads int
	lat     latencies
	faults  *faults
	// partsDone counts parts uploaded; mpDone is closed when every upload
	// has ended.
	partsDone atomic.Int64
	mpDone    chan struct{}
	mpEnd     time.Time // set before mpDone is closed
	// pids are the processes that serve this side, with this one.
	pids []int
	// etags[u] is the ETag upload u's complete returned ("" if it failed).
	etags []string
}

func newLoadTarget(name, bucket string, lay *loadLayout, uploads int, c *s3.Client) *loadTarget {
	return &loadTarget{name: name, bucket: bucket, lay: lay, uploads: uploads, s3: c,
		faults: newFaults(), mpDone: make(chan struct{}), etags: make([]string, uploads)}
}

func (t *loadTarget) key(u int) string { return fmt.Sprintf("load/%s/%03d", t.name, u) }

// loadClient is an aws-sdk-go-v2 client like the harness's, with room in
// its connection pool for every upload and small-object client at once.
func loadClient(tb testing.TB, endpoint, region, accessKey, secretKey string, conns int) *s3.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	tb.Cleanup(tr.CloseIdleConnections)
	return harness.NewS3Client(endpoint, region, accessKey, secretKey, tr, true)
}

// runLoad runs the uploads and the small-object clients against t until
// every upload has ended.
func runLoad(ctx context.Context, b *testing.B, t *loadTarget) *loadSide {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-t.faults.tooMany:
			cancel()
		case <-ctx.Done():
		}
	}()
	// One request each way first, so that a side that does not answer
	// fails here rather than as thousands of errors.
	if _, err := t.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(t.bucket), Key: aws.String("load-warmup/" + t.name), Body: bytes.NewReader(t.lay.pool[:loadSmallSize]),
	}); err != nil {
		b.Fatalf("%s: warm-up PUT: %v", t.name, err)
	}
	if _, err := getDiscard(ctx, t.s3, t.bucket, "load-warmup/"+t.name); err != nil {
		b.Fatalf("%s: warm-up GET: %v", t.name, err)
	}

	meter := startCPUMeter(t.pids)
	var stopSmall atomic.Bool
	var smallOps atomic.Int64
	var small sync.WaitGroup
	start := time.Now()
	for w := range loadSmallClients {
		small.Go(func() { smallClient(ctx, t, w, &stopSmall, &smallOps) })
	}
	var mp sync.WaitGroup
	for u := range t.uploads {
		mp.Go(func() { loadUpload(ctx, t, u) })
	}
	mp.Wait()
	mpElapsed := time.Since(start)
	t.mpEnd = time.Now()
	close(t.mpDone)
	stopSmall.Store(true)
	small.Wait()
	smallElapsed := time.Since(start)

	s := &loadSide{Side: t.name, MultipartSeconds: mpElapsed.Seconds(), SmallOps: smallOps.Load(), SmallSeconds: smallElapsed.Seconds(), OtherCPU: meter.otherShare()}
	for _, e := range t.etags {
		if e != "" {
			s.Completed++
		}
	}
	s.MultipartMiBPerSec = float64(int64(s.Completed)*t.lay.objectSize()) / mib / mpElapsed.Seconds()
	s.SmallOpsPerSec = float64(s.SmallOps) / smallElapsed.Seconds()
	s.Latency = t.lat.stats()
	b.Logf("%s: %d/%d uploads in %.1fs (%.1f MiB/s), %d small ops (%.0f/s)",
		t.name, s.Completed, t.uploads, s.MultipartSeconds, s.MultipartMiBPerSec, s.SmallOps, s.SmallOpsPerSec)
	return s
}

// loadUpload runs upload u: create, its parts one after the other, complete.
// A failure is counted and the upload aborted.
func loadUpload(ctx context.Context, t *loadTarget, u int) {
	key := t.key(u)
	begin := time.Now()
	created, err := t.s3.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(t.bucket), Key: aws.String(key)})
	if err != nil {
		t.faults.err("%s: CreateMultipartUpload %s: %v", t.name, key, err)
		return
	}
	t.lat.add(opCreate, time.Since(begin))
	id := aws.ToString(created.UploadId)
	parts := make([]types.CompletedPart, loadParts)
	for p := range loadParts {
		body, sum := t.lay.part(u, p)
		begin := time.Now()
		out, err := t.s3.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(t.bucket), Key: aws.String(key), UploadId: aws.String(id),
			PartNumber: aws.Int32(int32(p + 1)), Body: bytes.NewReader(body),
		})
		if err != nil {
			t.faults.err("%s: UploadPart %s part %d: %v", t.name, key, p+1, err)
			abortUpload(ctx, t.s3, t.bucket, key, id)
			return
		}
		t.lat.add(opPart, time.Since(begin))
		t.partsDone.Add(1)
		if got, want := unquoteETag(out.ETag), hex.EncodeToString(sum[:]); got != want {
			t.faults.mismatch("%s: UploadPart %s part %d: ETag %s, want %s", t.name, key, p+1, got, want)
		}
		parts[p] = types.CompletedPart{
			PartNumber: aws.Int32(int32(p + 1)), ETag: out.ETag,
			ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C,
			ChecksumCRC64NVME: out.ChecksumCRC64NVME, ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256,
		}
	}
	begin = time.Now()
	out, err := t.s3.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(t.bucket), Key: aws.String(key), UploadId: aws.String(id),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	})
	if err != nil {
		t.faults.err("%s: CompleteMultipartUpload %s: %v", t.name, key, err)
		abortUpload(ctx, t.s3, t.bucket, key, id)
		return
	}
	t.lat.add(opComplete, time.Since(begin))
	got := unquoteETag(out.ETag)
	if want := t.lay.etag(u); got != want {
		t.faults.mismatch("%s: CompleteMultipartUpload %s: ETag %s, want %s", t.name, key, got, want)
	}
	t.etags[u] = got
}

func unquoteETag(e *string) string { return strings.Trim(aws.ToString(e), `"`) }

// smallClient PUTs a 4 KiB object stamped with its client and iteration and
// GETs it back, checking the PUT's ETag and the bytes, until stop is set.
func smallClient(ctx context.Context, t *loadTarget, w int, stop *atomic.Bool, ops *atomic.Int64) {
	body := make([]byte, loadSmallSize)
	got := make([]byte, loadSmallSize+1)
	for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
		copy(body, t.lay.pool[(w*loadSmallKeys+i%loadSmallKeys)*loadSmallSize:])
		copy(body, fmt.Sprintf("%s client %d iteration %d\n", t.name, w, i))
		key := fmt.Sprintf("load-small/%s/%d/%02d", t.name, w, i%loadSmallKeys)
		begin := time.Now()
		out, err := t.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(t.bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
		if err != nil {
			t.faults.err("%s: small PUT %s: %v", t.name, key, err)
			continue
		}
		t.lat.add(opSmallPut, time.Since(begin))
		ops.Add(1)
		sum := md5.Sum(body)
		if e := unquoteETag(out.ETag); e != hex.EncodeToString(sum[:]) {
			t.faults.mismatch("%s: small PUT %s: ETag %s, want %x", t.name, key, e, sum)
		}
		begin = time.Now()
		n, err := getInto(ctx, t.s3, t.bucket, key, got)
		if err != nil {
			t.faults.err("%s: small GET %s: %v", t.name, key, err)
			continue
		}
		t.lat.add(opSmallGet, time.Since(begin))
		ops.Add(1)
		if !bytes.Equal(got[:n], body) {
			t.faults.mismatch("%s: small GET %s: %d bytes that differ from the %d just PUT", t.name, key, n, len(body))
		}
	}
}

// getInto GETs an object into buf (which should be one byte longer than the
// object, to see a longer one) and returns how much it read.
func getInto(ctx context.Context, c *s3.Client, bucket, key string, buf []byte) (int, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return 0, err
	}
	defer out.Body.Close()
	n, err := io.ReadFull(out.Body, buf)
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}
