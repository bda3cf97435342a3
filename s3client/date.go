package s3client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Dated is a backend answer's Date header and when, on the caller's clock,
// the request was sent and its answer received: the backend's clock read
// the Date (to the second, rounded down) between Sent and Received.
type Dated struct {
	Date           time.Time
	Sent, Received time.Time
}

// Date asks the backend a question that changes nothing and returns the
// answer's Date header, timed with now: with bucket "", for its buckets (a
// ListBuckets, which every backend answers), which must succeed; otherwise
// a HEAD of bucket, whose answer carries the backend's clock whether or
// not the key may read the bucket, so any answer below 500 serves.
func (c *Client) Date(ctx context.Context, bucket string, now func() time.Time) (Dated, error) {
	sent := now()
	method := http.MethodGet
	if bucket != "" {
		method = http.MethodHead
	}
	resp, done, err := c.send(ctx, method, bucket, "", url.Values{}, nil)
	if err != nil {
		return Dated{}, fmt.Errorf("backend date: %w", err)
	}
	defer done()
	d := Dated{Sent: sent, Received: now()}
	if resp.StatusCode/100 != 2 && (bucket == "" || resp.StatusCode >= 500) {
		return Dated{}, fmt.Errorf("backend date: %w", refusal(resp))
	}
	h := resp.Header.Get("Date")
	if d.Date, err = http.ParseTime(h); err != nil {
		return Dated{}, fmt.Errorf("backend date: the answer's Date header %q: %w", h, err)
	}
	return d, nil
}
