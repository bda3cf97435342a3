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

// Date asks the backend for its buckets (a ListBuckets, which every
// backend answers and which changes nothing) and returns the answer's Date
// header, timed with now.
func (c *Client) Date(ctx context.Context, now func() time.Time) (Dated, error) {
	sent := now()
	resp, done, err := c.send(ctx, http.MethodGet, "", "", url.Values{}, nil)
	if err != nil {
		return Dated{}, fmt.Errorf("backend date: %w", err)
	}
	defer done()
	d := Dated{Sent: sent, Received: now()}
	if resp.StatusCode/100 != 2 {
		return Dated{}, fmt.Errorf("backend date: %w", refusal(resp))
	}
	h := resp.Header.Get("Date")
	if d.Date, err = http.ParseTime(h); err != nil {
		return Dated{}, fmt.Errorf("backend date: the answer's Date header %q: %w", h, err)
	}
	return d, nil
}
