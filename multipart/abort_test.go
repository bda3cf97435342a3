package multipart

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestAbortOutcome reads every combination of status and body an abort
// can be answered with. Only a 200 or 204 with no body, or a NoSuchUpload,
// says the upload is gone; anything else (an error document under a
// success status among them) is unclear, so the session goes to
// cleanup_pending and the reconciler looks again.
func TestAbortOutcome(t *testing.T) {
	bodies := map[string]string{
		"empty":          "",
		"white space":    " \n",
		"error document": `<Error><Code>InternalError</Code><Message>later</Message></Error>`,
		"no such upload": `<Error><Code>NoSuchUpload</Code></Error>`,
		"no such bucket": `<Error><Code>NoSuchBucket</Code></Error>`,
		"html page":      `<html>bad gateway</html>`,
		"other result":   `<CompleteMultipartUploadResult><ETag>"e"</ETag></CompleteMultipartUploadResult>`,
	}
	for _, status := range []int{200, 204, 400, 403, 404, 409, 500, 503} {
		for name, body := range bodies {
			gone := ((status == 200 || status == 204) && strings.TrimSpace(body) == "") ||
				(status == 404 && name == "no such upload")
			resp := &http.Response{StatusCode: status, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}}
			err := abortOutcome(resp, nil)
			if gone != (err == nil) {
				t.Errorf("abort answered %d with %s: outcome %v; want gone %v", status, name, err, gone)
			}
		}
	}
	if err := abortOutcome(nil, errors.New("connection reset")); err == nil {
		t.Error("abort without an answer counted as gone")
	}
}
