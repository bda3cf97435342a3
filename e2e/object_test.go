//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

// TestObjectRoundTrip puts, gets, heads and deletes objects of several sizes
// through the gateway with both Go clients, checking the bytes through the
// gateway and on the backend.
func TestObjectRoundTrip(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	direct := e.DirectSDK(t)

	sizes := []struct {
		name string
		size int64
	}{
		{"empty", 0},
		{"1 byte", 1},
		{"4 KiB", 4 * kib},
		{"1 MiB + 1", mib + 1},
		{"100 MiB", 100 * mib},
	}
	for i, sz := range sizes {
		t.Run("aws-sdk-go-v2/"+sz.name, func(t *testing.T) {
			c := e.SDK(t)
			d := harness.NewData(uint64(100+i), sz.size)
			key := "sdk/" + strings.ReplaceAll(sz.name, " ", "_")
			putData(t, c, bucket, key, d)
			requireObject(t, c, bucket, key, d)
			requireObject(t, direct, bucket, key, d)

			head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("HeadObject: %v", err)
			}
			dhead, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("HeadObject on the backend: %v", err)
			}
			if aws.ToInt64(head.ContentLength) != sz.size || aws.ToString(head.ETag) != aws.ToString(dhead.ETag) {
				t.Fatalf("HeadObject: length %d etag %s; backend: length %d etag %s",
					aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), aws.ToInt64(dhead.ContentLength), aws.ToString(dhead.ETag))
			}

			if _, err := c.DeleteObject(t.Context(), &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
				t.Fatalf("DeleteObject: %v", err)
			}
			requireAbsent(t, direct, bucket, key)
			_, err = c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			requireAPIError(t, err, "NotFound")
			_, err = c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			requireAPIError(t, err, "NoSuchKey")
		})
	}
	for i, sz := range sizes {
		t.Run("minio-go/"+sz.name, func(t *testing.T) {
			c := e.MinioGo(t)
			d := harness.NewData(uint64(200+i), sz.size)
			key := "minio-go/" + strings.ReplaceAll(sz.name, " ", "_")
			// One PUT, however large: a signed stream of 64 KiB chunks.
			info, err := c.PutObject(t.Context(), bucket, key, d.Reader(), d.Size, minio.PutObjectOptions{DisableMultipart: true})
			if err != nil {
				t.Fatalf("PutObject: %v", err)
			}
			if info.Size != sz.size {
				t.Fatalf("PutObject size %d, want %d", info.Size, sz.size)
			}
			requireObjectMinioGo(t, c, bucket, key, d)
			requireObject(t, direct, bucket, key, d)

			st, err := c.StatObject(t.Context(), bucket, key, minio.StatObjectOptions{})
			if err != nil {
				t.Fatalf("StatObject: %v", err)
			}
			if st.Size != sz.size || st.ETag != info.ETag {
				t.Fatalf("StatObject: size %d etag %s; PutObject said etag %s", st.Size, st.ETag, info.ETag)
			}
			if err := c.RemoveObject(t.Context(), bucket, key, minio.RemoveObjectOptions{}); err != nil {
				t.Fatalf("RemoveObject: %v", err)
			}
			requireAbsent(t, direct, bucket, key)
		})
	}
}

// TestListObjectsV2 lists with a prefix, a delimiter and small pages through
// the gateway.
func TestListObjectsV2(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	c := e.SDK(t)

	var want []string
	for i := range 13 {
		k := fmt.Sprintf("logs/2025/%02d.txt", i)
		want = append(want, k)
		putData(t, c, bucket, k, harness.NewData(uint64(i), 16))
	}
	for _, k := range []string{"logs/readme", "other/a", "other/b", "top"} {
		putData(t, c, bucket, k, harness.NewData(7, 16))
	}

	t.Run("aws-sdk-go-v2 pages", func(t *testing.T) {
		var got []string
		pages := 0
		p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String("logs/2025/"), MaxKeys: aws.Int32(4),
		})
		for p.HasMorePages() {
			page, err := p.NextPage(t.Context())
			if err != nil {
				t.Fatalf("ListObjectsV2 page %d: %v", pages+1, err)
			}
			pages++
			if len(page.Contents) > 4 {
				t.Fatalf("page %d has %d keys, max 4", pages, len(page.Contents))
			}
			for _, o := range page.Contents {
				got = append(got, aws.ToString(o.Key))
				if aws.ToInt64(o.Size) != 16 {
					t.Fatalf("%s: size %d, want 16", aws.ToString(o.Key), aws.ToInt64(o.Size))
				}
			}
		}
		if pages != 4 {
			t.Fatalf("%d pages, want 4 (13 keys, 4 per page)", pages)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("keys %v, want %v", got, want)
		}
	})

	t.Run("aws-sdk-go-v2 delimiter", func(t *testing.T) {
		out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Delimiter: aws.String("/")})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		var prefixes, keys []string
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !slices.Equal(prefixes, []string{"logs/", "other/"}) || !slices.Equal(keys, []string{"top"}) {
			t.Fatalf("prefixes %v keys %v, want [logs/ other/] [top]", prefixes, keys)
		}
	})

	t.Run("aws-sdk-go-v2 start-after", func(t *testing.T) {
		out, err := c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{
			Bucket: aws.String(bucket), Prefix: aws.String("other/"), StartAfter: aws.String("other/a"),
		})
		if err != nil {
			t.Fatalf("ListObjectsV2: %v", err)
		}
		if len(out.Contents) != 1 || aws.ToString(out.Contents[0].Key) != "other/b" {
			t.Fatalf("got %d keys, want just other/b", len(out.Contents))
		}
	})

	t.Run("minio-go", func(t *testing.T) {
		mc := e.MinioGo(t)
		var got []string
		for o := range mc.ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Prefix: "logs/2025/", Recursive: true, MaxKeys: 5}) {
			if o.Err != nil {
				t.Fatalf("ListObjects: %v", o.Err)
			}
			got = append(got, o.Key)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("keys %v, want %v", got, want)
		}
	})
}

// TestCopyObject copies within and across buckets through the gateway,
// keeping or replacing the metadata.
func TestCopyObject(t *testing.T) {
	e := harness.Start(t)
	src := e.Bucket(t)
	dst := e.Bucket(t)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	d := harness.NewData(3, 3*mib+5)
	putData(t, c, src, "source object", d, func(in *s3.PutObjectInput) {
		in.Metadata = map[string]string{"origin": "copy-test"}
		in.ContentType = aws.String("application/x-copy-test")
	})

	t.Run("same bucket, metadata copied", func(t *testing.T) {
		_, err := c.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(src), Key: aws.String("copy"), CopySource: aws.String(src + "/source%20object"),
		})
		if err != nil {
			t.Fatalf("CopyObject: %v", err)
		}
		requireObject(t, direct, src, "copy", d)
		head, err := direct.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(src), Key: aws.String("copy")})
		if err != nil {
			t.Fatal(err)
		}
		if head.Metadata["origin"] != "copy-test" || aws.ToString(head.ContentType) != "application/x-copy-test" {
			t.Fatalf("copy has metadata %v and content type %q", head.Metadata, aws.ToString(head.ContentType))
		}
	})

	t.Run("other bucket, metadata replaced", func(t *testing.T) {
		_, err := c.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(dst), Key: aws.String("dir/copy"), CopySource: aws.String(src + "/source%20object"),
			MetadataDirective: s3types.MetadataDirectiveReplace,
			Metadata:          map[string]string{"origin": "replaced"},
			ContentType:       aws.String("text/plain"),
		})
		if err != nil {
			t.Fatalf("CopyObject: %v", err)
		}
		requireObject(t, c, dst, "dir/copy", d)
		head, err := c.HeadObject(t.Context(), &s3.HeadObjectInput{Bucket: aws.String(dst), Key: aws.String("dir/copy")})
		if err != nil {
			t.Fatal(err)
		}
		if head.Metadata["origin"] != "replaced" || aws.ToString(head.ContentType) != "text/plain" {
			t.Fatalf("copy has metadata %v and content type %q", head.Metadata, aws.ToString(head.ContentType))
		}
	})

	t.Run("missing source", func(t *testing.T) {
		_, err := c.CopyObject(t.Context(), &s3.CopyObjectInput{
			Bucket: aws.String(dst), Key: aws.String("nothing"), CopySource: aws.String(src + "/does-not-exist"),
		})
		requireAPIError(t, err, "NoSuchKey")
		requireAbsent(t, direct, dst, "nothing")
	})

	t.Run("minio-go", func(t *testing.T) {
		mc := e.MinioGo(t)
		_, err := mc.CopyObject(t.Context(),
			minio.CopyDestOptions{Bucket: dst, Object: "minio-go copy"},
			minio.CopySrcOptions{Bucket: src, Object: "source object"})
		if err != nil {
			t.Fatalf("CopyObject: %v", err)
		}
		requireObject(t, direct, dst, "minio-go copy", d)
	})
}

// TestRangedGet reads byte ranges through the gateway.
func TestRangedGet(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	c := e.SDK(t)
	d := harness.NewData(4, 5*mib+123)
	putData(t, c, bucket, "ranged", d)

	cases := []struct {
		rng       string
		off, n    int64
		wantRange string
	}{
		{"bytes=0-0", 0, 1, fmt.Sprintf("bytes 0-0/%d", d.Size)},
		{"bytes=100-199", 100, 100, fmt.Sprintf("bytes 100-199/%d", d.Size)},
		{"bytes=-10", d.Size - 10, 10, fmt.Sprintf("bytes %d-%d/%d", d.Size-10, d.Size-1, d.Size)},
		{fmt.Sprintf("bytes=%d-", 3*mib), 3 * mib, d.Size - 3*mib, fmt.Sprintf("bytes %d-%d/%d", 3*mib, d.Size-1, d.Size)},
		{"bytes=1048570-2097160", 1048570, 1048591, fmt.Sprintf("bytes 1048570-2097160/%d", d.Size)},
	}
	for _, tc := range cases {
		t.Run(tc.rng, func(t *testing.T) {
			out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("ranged"), Range: aws.String(tc.rng)})
			if err != nil {
				t.Fatalf("GetObject: %v", err)
			}
			defer out.Body.Close()
			got, err := io.ReadAll(out.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, d.Range(tc.off, tc.n)) {
				t.Fatalf("got %d bytes that differ from bytes [%d, %d)", len(got), tc.off, tc.off+tc.n)
			}
			if aws.ToString(out.ContentRange) != tc.wantRange {
				t.Fatalf("Content-Range %q, want %q", aws.ToString(out.ContentRange), tc.wantRange)
			}
		})
	}

	t.Run("unsatisfiable", func(t *testing.T) {
		_, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("ranged"), Range: aws.String(fmt.Sprintf("bytes=%d-", d.Size+10))})
		requireAPIError(t, err, "InvalidRange")
	})

	t.Run("minio-go", func(t *testing.T) {
		mc := e.MinioGo(t)
		opts := minio.GetObjectOptions{}
		if err := opts.SetRange(2*mib, 2*mib+99); err != nil {
			t.Fatal(err)
		}
		obj, err := mc.GetObject(t.Context(), bucket, "ranged", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer obj.Close()
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, d.Range(2*mib, 100)) {
			t.Fatalf("got %d bytes that differ from the range", len(got))
		}
	})
}

// TestMetadataAndHeaders checks that the headers that carry meaning survive
// the gateway both ways: user metadata, content headers, checksums and
// conditionals.
func TestMetadataAndHeaders(t *testing.T) {
	e := harness.Start(t)
	bucket := e.Bucket(t)
	c := e.SDK(t)
	direct := e.DirectSDK(t)
	d := harness.NewData(5, 64*kib)
	meta := map[string]string{"color": "blue", "owner-id": "12345", "note": "with spaces and = signs"}
	expires := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	put := putData(t, c, bucket, "meta", d, func(in *s3.PutObjectInput) {
		in.Metadata = meta
		in.ContentType = aws.String("text/csv; charset=utf-8")
		in.CacheControl = aws.String("max-age=60")
		in.ContentDisposition = aws.String(`attachment; filename="report.csv"`)
		in.ContentEncoding = aws.String("gzip")
		in.ContentLanguage = aws.String("de")
		in.Expires = aws.Time(expires)
		in.ChecksumAlgorithm = s3types.ChecksumAlgorithmSha256
	})

	check := func(t *testing.T, who string, h *s3.HeadObjectOutput) {
		t.Helper()
		checkMetadata(t, who, h, meta, expires, aws.ToString(put.ChecksumSHA256))
	}
	headIn := &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), ChecksumMode: s3types.ChecksumModeEnabled}
	h, err := c.HeadObject(t.Context(), headIn)
	if err != nil {
		t.Fatalf("HeadObject: %v", err)
	}
	check(t, "through the gateway", h)
	dh, err := direct.HeadObject(t.Context(), headIn)
	if err != nil {
		t.Fatalf("HeadObject on the backend: %v", err)
	}
	check(t, "on the backend", dh)
	if aws.ToString(put.ChecksumSHA256) == "" {
		t.Error("PutObject with a SHA-256 checksum answered without one")
	}

	// Go and most tools treat header names case-insensitively, but some
	// clients (botocore, so the aws CLI) keep a metadata name as sent: S3
	// and MinIO send x-amz-meta-* names in lower case, and so must the
	// gateway, whose HTTP stack would otherwise send Go's canonical form
	// (X-Amz-Meta-Owner-Id), which the aws CLI reports as key Owner-Id.
	t.Run("metadata header names on the wire", func(t *testing.T) {
		names := func(endpoint string) []string {
			req := newRequest(t, http.MethodHead, objectURL(endpoint, bucket, "meta"), nil)
			return metaHeaderNames(t, signed(t, e, req, harness.EmptySHA256))
		}
		got, want := names(e.Endpoint), names(e.MinIO.Endpoint)
		if !slices.Equal(got, want) {
			t.Fatalf("x-amz-meta-* header names on the wire: %q; the backend sends %q", got, want)
		}
	})

	t.Run("minio-go user metadata", func(t *testing.T) {
		mc := e.MinioGo(t)
		_, err := mc.PutObject(t.Context(), bucket, "meta-minio-go", bytes.NewReader([]byte("hello")), 5, minio.PutObjectOptions{
			UserMetadata: map[string]string{"Color": "red"},
			ContentType:  "text/plain",
		})
		if err != nil {
			t.Fatalf("PutObject: %v", err)
		}
		st, err := mc.StatObject(t.Context(), bucket, "meta-minio-go", minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if st.UserMetadata["Color"] != "red" || st.ContentType != "text/plain" {
			t.Fatalf("user metadata %v, content type %q", st.UserMetadata, st.ContentType)
		}
	})

	t.Run("conditionals", func(t *testing.T) {
		etag := aws.ToString(h.ETag)
		_, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), IfNoneMatch: aws.String(etag)})
		requireAPIError(t, err, "NotModified")
		_, err = c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
		requireAPIError(t, err, "PreconditionFailed")
		out, err := c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), IfMatch: aws.String(etag)})
		if err != nil {
			t.Fatalf("GetObject If-Match its own ETag: %v", err)
		}
		out.Body.Close()
		_, err = c.GetObject(t.Context(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), IfModifiedSince: aws.Time(time.Now().Add(time.Hour))})
		requireAPIError(t, err, "NotModified")
		// A conditional write: PUT If-None-Match * must not overwrite.
		_, err = c.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("meta"), Body: bytes.NewReader([]byte("x")), IfNoneMatch: aws.String("*")})
		requireAPIError(t, err, "PreconditionFailed")
		requireObject(t, direct, bucket, "meta", d)
	})
}

// checkMetadata checks that h, as who saw it, carries the metadata, the
// content headers, the SHA-256 checksum and the Expires time
// TestMetadataAndHeaders put.
func checkMetadata(t *testing.T, who string, h *s3.HeadObjectOutput, meta map[string]string, expires time.Time, sha256 string) {
	t.Helper()
	if !maps.Equal(h.Metadata, meta) {
		t.Errorf("%s: metadata %v, want %v", who, h.Metadata, meta)
	}
	for _, f := range []struct{ name, got, want string }{
		{"Content-Type", aws.ToString(h.ContentType), "text/csv; charset=utf-8"},
		{"Cache-Control", aws.ToString(h.CacheControl), "max-age=60"},
		{"Content-Disposition", aws.ToString(h.ContentDisposition), `attachment; filename="report.csv"`},
		{"Content-Encoding", aws.ToString(h.ContentEncoding), "gzip"},
		{"Content-Language", aws.ToString(h.ContentLanguage), "de"},
		{"x-amz-checksum-sha256", aws.ToString(h.ChecksumSHA256), sha256},
	} {
		if f.got != f.want {
			t.Errorf("%s: %s %q, want %q", who, f.name, f.got, f.want)
		}
	}
	if got, want := aws.ToString(h.ExpiresString), expires.Format(http.TimeFormat); got != want {
		t.Errorf("%s: Expires %q, want %q", who, got, want)
	}
}

// metaHeaderNames sends req over a raw connection and returns the names of
// the x-amz-meta-* response headers exactly as they came, sorted.
func metaHeaderNames(t *testing.T, req *http.Request) []string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", req.URL.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var names []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the response head: %v", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if name, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(strings.ToLower(name), "x-amz-meta-") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
