package s3err

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"testing"
)

func TestStampRequestID(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"backend error", `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>NoSuchKey</Code><RequestId>18A2B</RequestId><HostId>h</HostId></Error>`,
			`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>NoSuchKey</Code><RequestId>GW&lt;1&gt;</RequestId><HostId>h</HostId></Error>`},
		{"empty id", `<Error><Code>X</Code><RequestId></RequestId></Error>`, `<Error><Code>X</Code><RequestId>GW&lt;1&gt;</RequestId></Error>`},
		{"no id", `<Error><Code>X</Code></Error>`, `<Error><Code>X</Code><RequestId>GW&lt;1&gt;</RequestId></Error>`},
		{"a result is not touched", `<CompleteMultipartUploadResult><RequestId>18A2B</RequestId></CompleteMultipartUploadResult>`,
			`<CompleteMultipartUploadResult><RequestId>18A2B</RequestId></CompleteMultipartUploadResult>`},
		{"nor is plain text", `NoSuchKey <RequestId>1</RequestId>`, `NoSuchKey <RequestId>1</RequestId>`},
		{"nor nothing", ``, ``},
	}
	for _, tt := range tests {
		if got := string(StampRequestID([]byte(tt.in), "GW<1>")); got != tt.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.name, got, tt.want)
		}
	}
}

func TestStampResponse(t *testing.T) {
	t.Parallel()
	const doc = `<Error><Code>NoSuchKey</Code><RequestId>BACKEND</RequestId></Error>`
	resp := func(status int, method, contentType, encoding string, length int64) *http.Response {
		h := http.Header{"Content-Type": {contentType}, "Content-Length": {strconv.Itoa(len(doc))}}
		if encoding != "" {
			h.Set("Content-Encoding", encoding)
		}
		return &http.Response{StatusCode: status, Header: h, ContentLength: length,
			Body: io.NopCloser(bytes.NewReader([]byte(doc))), Request: &http.Request{Method: method}}
	}
	n := int64(len(doc))
	stamped := `<Error><Code>NoSuchKey</Code><RequestId>GW1</RequestId></Error>`
	tests := []struct {
		name string
		resp *http.Response
		want string
	}{
		{"error", resp(404, "GET", "application/xml", "", n), stamped},
		{"success", resp(200, "GET", "application/xml", "", n), doc},
		{"HEAD", resp(404, "HEAD", "application/xml", "", n), doc},
		{"not XML", resp(404, "GET", "text/plain", "", n), doc},
		{"compressed", resp(404, "GET", "application/xml", "gzip", n), doc},
		{"unknown length", resp(404, "GET", "application/xml", "", -1), doc},
		{"too large", resp(404, "GET", "application/xml", "", MaxStampedBody+1), doc},
	}
	for _, tt := range tests {
		StampResponse(tt.resp, "GW1")
		body, _ := io.ReadAll(tt.resp.Body)
		if string(body) != tt.want {
			t.Errorf("%s: body %s, want %s", tt.name, body, tt.want)
		}
		if tt.resp.ContentLength >= 0 && tt.resp.ContentLength <= MaxStampedBody && tt.resp.ContentLength != int64(len(body)) {
			t.Errorf("%s: ContentLength %d for a %d-byte body", tt.name, tt.resp.ContentLength, len(body))
		}
		if got := tt.resp.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
			t.Errorf("%s: Content-Length %s for a %d-byte body", tt.name, got, len(body))
		}
	}
}
