package s3client

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
)

// PutSmall writes body (held in memory) as the object bucket/key, sent
// once with its Content-MD5, and returns the ETag the backend answered.
// A success is a 2xx answer without an error document; any other answer
// is an *Error, and no answer is the transport's error: the object may or
// may not have been written.
func (c *Client) PutSmall(ctx context.Context, bucket, key string, body []byte, contentType string) (string, error) {
	sum := md5.Sum(body)
	resp, done, err := c.send(ctx, http.MethodPut, bucket, key, nil, func(req *http.Request) {
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	})
	if err != nil {
		return "", err
	}
	defer done()
	answer, err := ReadBody(resp.Body, MaxAnswer)
	if err != nil {
		return "", fmt.Errorf("put %s/%s: read backend answer: %w", bucket, key, err)
	}
	if err := answerError(resp, answer); err != nil {
		return "", err
	}
	return UnquoteETag(resp.Header.Get("ETag")), nil
}
