package s3client_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sweepgate/sweepgate/s3client"
)

// plainBackend addresses an unsigned test server path-style.
type plainBackend struct{ endpoint string }

func (b plainBackend) NewRequest(ctx context.Context, method, bucket, key string, query url.Values) (*http.Request, error) {
	u := b.endpoint + "/" + bucket
	if key != "" {
		u += "/" + key
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	return http.NewRequestWithContext(ctx, method, u, nil)
}

func (b plainBackend) RoundTrip(req *http.Request) (*http.Response, error) {
	return http.DefaultTransport.RoundTrip(req)
}

// serve returns a client of a server that answers every request with h,
// counting the requests.
func serve(t *testing.T, h http.HandlerFunc) (*s3client.Client, *atomic.Int64) {
	t.Helper()
	n := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return s3client.New(plainBackend{srv.URL}, 0), n
}

// TestAnswersMinIOCannotGive covers answers a healthy MinIO never gives:
// oversized and cut-off bodies, a non-XML 500, an error document in a 200.
func TestAnswersMinIOCannotGive(t *testing.T) {
	ctx := t.Context()

	t.Run("oversized listing", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/xml")
			_, _ = w.Write([]byte("<ListAllMyBucketsResult><Owner>"))
			_, _ = w.Write(bytes.Repeat([]byte("x"), s3client.MaxAnswer))
			_, _ = w.Write([]byte("</Owner></ListAllMyBucketsResult>"))
		})
		if _, err := c.ListBuckets(ctx); !errors.Is(err, s3client.ErrTooLarge) {
			t.Errorf("ListBuckets of an oversized answer = %v; want ErrTooLarge", err)
		}
	})

	t.Run("cut-off listing", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte("<ListBucketResult><IsTruncated>false</IsTruncated>"))
		})
		if _, err := c.ListObjects(ctx, "b", "", "", 10); err == nil {
			t.Error("ListObjects of a cut-off answer succeeded")
		}
	})

	t.Run("non-XML 500", func(t *testing.T) {
		c, n := serve(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream exploded", http.StatusInternalServerError)
		})
		err := c.Abort(ctx, "b", "k", "id")
		var se *s3client.Error
		if !errors.As(err, &se) || se.Status != 500 || se.Code != "" || !strings.Contains(string(se.Body), "exploded") {
			t.Errorf("Abort answered a non-XML 500 = %v; want an *Error with status 500 and no code", err)
		}
		if n.Load() != 1 {
			t.Errorf("Abort sent %d requests after a 500; want 1 (no retry)", n.Load())
		}
	})

	t.Run("error document in a 200", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>InternalError</Code><Message>try again</Message></Error>"))
		})
		_, err := c.DeleteObjects(ctx, "b", []string{"k"})
		var se *s3client.Error
		if !errors.As(err, &se) || se.Status != 200 || se.Code != "InternalError" || se.Message != "try again" {
			t.Errorf("DeleteObjects answered an error document in a 200 = %v; want an *Error", err)
		}
	})

	t.Run("object past its limit without a length", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("ETag", `"e"`)
			w.(http.Flusher).Flush() // no Content-Length: the body is chunked
			_, _ = w.Write(bytes.Repeat([]byte("y"), 101))
		})
		if _, _, err := c.Get(ctx, "b", "k", s3client.GetOptions{}, 100); !errors.Is(err, s3client.ErrTooLarge) {
			t.Errorf("Get of 101 bytes within 100 = %v; want ErrTooLarge", err)
		}
		body, etag, err := c.Get(ctx, "b", "k", s3client.GetOptions{}, 101)
		if err != nil || len(body) != 101 || etag != "e" {
			t.Errorf("Get of 101 bytes within 101 = %d bytes, %q, %v", len(body), etag, err)
		}
	})

	t.Run("oversized refusal of an object read", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write(bytes.Repeat([]byte("z"), s3client.MaxAnswer+1))
		})
		_, _, err := c.Get(ctx, "b", "k", s3client.GetOptions{}, 100)
		var se *s3client.Error
		if err == nil || errors.Is(err, s3client.ErrTooLarge) || errors.As(err, &se) {
			t.Errorf("Get refused with an oversized body = %v; want an error that is neither ErrTooLarge nor an *Error", err)
		}
	})

	t.Run("cut-off object", func(t *testing.T) {
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(50))
			_, _ = w.Write([]byte("short"))
		})
		if _, _, err := c.Get(ctx, "b", "k", s3client.GetOptions{}, 100); err == nil {
			t.Error("Get of a cut-off body succeeded")
		}
	})
}

func TestReadBody(t *testing.T) {
	for _, tt := range []struct {
		n, limit int
		tooLarge bool
	}{{0, 0, false}, {10, 10, false}, {11, 10, true}, {1, 0, true}} {
		b, err := s3client.ReadBody(bytes.NewReader(make([]byte, tt.n)), int64(tt.limit))
		if tt.tooLarge != errors.Is(err, s3client.ErrTooLarge) || (!tt.tooLarge && len(b) != tt.n) {
			t.Errorf("ReadBody(%d bytes, limit %d) = %d bytes, %v", tt.n, tt.limit, len(b), err)
		}
	}
}

func TestErrorDocument(t *testing.T) {
	tests := []struct {
		body, code, message string
		ok                  bool
	}{
		{`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>NoSuchUpload</Code><Message>x</Message></Error>`, "NoSuchUpload", "x", true},
		{"   \n  <Error><Code>InternalError</Code></Error>", "InternalError", "", true},
		{`<CompleteMultipartUploadResult><ETag>x</ETag></CompleteMultipartUploadResult>`, "", "", false},
		{`<DeleteResult><Error><Key>k</Key><Code>AccessDenied</Code></Error></DeleteResult>`, "", "", false},
		{``, "", "", false},
		{`upstream exploded`, "", "", false},
		{`<Error><Code>`, "", "", true},
	}
	for _, tt := range tests {
		code, msg, ok := s3client.ErrorDocument([]byte(tt.body))
		if code != tt.code || msg != tt.message || ok != tt.ok {
			t.Errorf("ErrorDocument(%q) = %q, %q, %v; want %q, %q, %v", tt.body, code, msg, ok, tt.code, tt.message, tt.ok)
		}
	}
}

func TestResultETag(t *testing.T) {
	tests := []struct {
		body, etag string
		ok         bool
	}{
		{`<CopyObjectResult><ETag>"abc"</ETag></CopyObjectResult>`, "abc", true},
		{`<CompleteMultipartUploadResult><ETag>&#34;abc-2&#34;</ETag></CompleteMultipartUploadResult>`, "abc-2", true},
		{`<Error><Code>InternalError</Code><ETag>x</ETag></Error>`, "", false},
		{`<CopyObjectResult></CopyObjectResult>`, "", false},
		{`not xml`, "", false},
	}
	for _, tt := range tests {
		if etag, ok := s3client.ResultETag([]byte(tt.body)); etag != tt.etag || ok != tt.ok {
			t.Errorf("ResultETag(%q) = %q, %v; want %q, %v", tt.body, etag, ok, tt.etag, tt.ok)
		}
	}
}

// TestListUploadsLargerThanMaxAnswer lists a bucket whose uploads' XML is
// larger than MaxAnswer in one page, as MinIO answers a bucket of some
// 45,000 uploads (it ignores max-uploads). A real MinIO gives this answer
// too, but only after minutes of creating uploads, so a server here sends
// it.
func TestListUploadsLargerThanMaxAnswer(t *testing.T) {
	const n = 60_000
	var page bytes.Buffer
	page.WriteString(`<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>`)
	for i := range n {
		page.WriteString("<Upload><Key>dir%2Fobject-" + strconv.Itoa(i) + "</Key><UploadId>" + strings.Repeat("u", 200) + strconv.Itoa(i) +
			"</UploadId><Initiator><ID>x</ID><DisplayName>x</DisplayName></Initiator><Owner><ID>x</ID><DisplayName>x</DisplayName></Owner><StorageClass>STANDARD</StorageClass><Initiated>2026-12-01T10:00:00.000Z</Initiated></Upload>")
	}
	page.WriteString("</ListMultipartUploadsResult>")
	if page.Len() <= s3client.MaxAnswer {
		t.Fatalf("the listing is %d bytes, not above MaxAnswer", page.Len())
	}
	c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write(page.Bytes())
	})
	got, err := c.ListUploads(t.Context(), "b", "", "", 1000)
	if err != nil {
		t.Fatalf("ListUploads of a %d-byte listing: %v", page.Len(), err)
	}
	if len(got.Uploads) != n || !got.Done {
		t.Fatalf("ListUploads returned %d uploads (done %v), want %d", len(got.Uploads), got.Done, n)
	}
	if u := got.Uploads[n-1]; u.Key != "dir/object-"+strconv.Itoa(n-1) || u.Initiated.IsZero() {
		t.Errorf("last upload %+v: key not decoded or time not parsed", u)
	}

	c, _ = serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`<Error><Code>InternalError</Code><Message>x</Message></Error>`))
	})
	if _, err := c.ListUploads(t.Context(), "b", "", "", 1000); err == nil {
		t.Error("ListUploads of an error document in a 200 succeeded")
	}
}

// TestListUploadsNotPlain lists a bucket whose answer holds XML the
// client's own decoder leaves alone (a comment, CDATA, a carriage return):
// it asks again and decodes that answer with encoding/xml.
func TestListUploadsNotPlain(t *testing.T) {
	c, sent := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<ListMultipartUploadsResult><!-- a backend's note --><EncodingType>url</EncodingType>" +
			"<Upload><Key><![CDATA[dir%2Fa]]></Key><UploadId>u\r\n1</UploadId><Initiated>2026-12-01T10:00:00.000Z</Initiated></Upload>" +
			"<IsTruncated>false</IsTruncated></ListMultipartUploadsResult>"))
	})
	got, err := c.ListUploads(t.Context(), "b", "", "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Uploads) != 1 || got.Uploads[0].Key != "dir/a" || got.Uploads[0].UploadID != "u\n1" || !got.Done {
		t.Errorf("ListUploads = %+v; want dir/a, upload u\\n1, done", got)
	}
	if n := sent.Load(); n != 2 {
		t.Errorf("%d requests sent; want 2 (the listing asked for again)", n)
	}
}

// TestContinuedListingStartsOver: a backend that ignores a continuation
// token answers from the first key (MinIO does not); what does not sort
// after the previous page is left out, so nothing is listed twice.
func TestContinuedListingStartsOver(t *testing.T) {
	ctx := t.Context()
	c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("continuation-token") != "t1" {
			t.Errorf("continued listing query = %v; want the token t1", r.URL.Query())
		}
		_, _ = w.Write([]byte("<ListBucketResult><IsTruncated>false</IsTruncated>" +
			"<Contents><Key>a</Key></Contents><Contents><Key>b</Key></Contents><Contents><Key>c</Key></Contents></ListBucketResult>"))
	})
	page, err := c.ListObjectsNext(ctx, "b", "", s3client.ObjectPage{Next: "b", Token: "t1"}, 10)
	if err != nil || len(page.Objects) != 1 || page.Objects[0].Key != "c" || page.Next != "c" || !page.Done {
		t.Errorf("ListObjectsNext after b = %+v, %v; want c alone", page, err)
	}
}

// TestSuccessStatusWithForeignBody answers each call that decides a
// deletion or reads a listing with a success status and a body that is
// not the call's own document: every one is an error (an unclear answer),
// never a delete with no failures, an empty listing or an abort done. The
// call's own document, answered the same way, is a success: the check is
// the document, not the status.
func TestSuccessStatusWithForeignBody(t *testing.T) {
	ctx := t.Context()
	foreign := map[string]string{
		"empty":          "",
		"html page":      "<html><body>gateway timeout, retrying</body></html>",
		"plain text":     "ok",
		"other result":   `<?xml version="1.0"?><CopyObjectResult><ETag>"e"</ETag></CopyObjectResult>`,
		"error document": `<Error><Code>InternalError</Code><Message>later</Message></Error>`,
		"truncated":      `<DeleteResult><Deleted><Key>k</Key>`,
	}
	calls := []struct {
		name string
		own  string // the call's own document
		call func(*s3client.Client) error
	}{
		{"DeleteObjects", `<DeleteResult></DeleteResult>`, func(c *s3client.Client) error {
			_, err := c.DeleteObjects(ctx, "b", []string{"k"})
			return err
		}},
		{"ListObjects", `<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>`, func(c *s3client.Client) error {
			_, err := c.ListObjects(ctx, "b", "", "", 10)
			return err
		}},
		{"ListBuckets", `<ListAllMyBucketsResult><Buckets></Buckets></ListAllMyBucketsResult>`, func(c *s3client.Client) error {
			_, err := c.ListBuckets(ctx)
			return err
		}},
		{"CountParts", `<ListPartsResult><IsTruncated>false</IsTruncated></ListPartsResult>`, func(c *s3client.Client) error {
			_, _, err := c.CountParts(ctx, "b", "k", "id")
			return err
		}},
		{"ListUploads", `<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>`, func(c *s3client.Client) error {
			_, err := c.ListUploads(ctx, "b", "", "", 10)
			return err
		}},
		{"Abort", ``, func(c *s3client.Client) error { return c.Abort(ctx, "b", "k", "id") }},
	}
	for _, call := range calls {
		for name, body := range foreign {
			if body == call.own {
				continue
			}
			for _, status := range []int{http.StatusOK, http.StatusNoContent} {
				if status == http.StatusNoContent && body != "" {
					continue // a 204 carries no body
				}
				c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(status)
					_, _ = w.Write([]byte(body))
				})
				if err := call.call(c); err == nil {
					t.Errorf("%s answered %d with %s: success; want an unclear answer", call.name, status, name)
				}
			}
		}
		c, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(call.own)) })
		if err := call.call(c); err != nil {
			t.Errorf("%s answered 200 with its own document: %v", call.name, err)
		}
	}
}
