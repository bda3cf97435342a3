package backend

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/sweepgate/sweepgate/s3client"
)

// Check proves the backend answers calls signed with the background
// identity: a ListBuckets call, or with buckets a one-key listing of each
// of them (so that a key allowed only those buckets passes), must come back
// with a status below 500, and not refuse the key itself. A listing the
// key's policy denies (AccessDenied) passes: the backend took the key, and
// the bucket is the reclaimer's report's to name (denied_buckets), not a
// reason to take the gateway out of service. ctx must carry no Caller.
func (c *Client) Check(ctx context.Context, buckets []string) error {
	if len(buckets) == 0 {
		return c.checkOnce(ctx, "", nil)
	}
	for _, b := range buckets {
		if err := c.checkOnce(ctx, b, url.Values{"list-type": {"2"}, "max-keys": {"1"}}); err != nil {
			return fmt.Errorf("bucket %s: %w", b, err)
		}
	}
	return nil
}

func (c *Client) checkOnce(ctx context.Context, bucket string, q url.Values) error {
	req, err := c.NewRequest(ctx, http.MethodGet, bucket, "", q)
	if err != nil {
		return err
	}
	resp, err := c.check.Do(req)
	if err != nil {
		return fmt.Errorf("backend unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch code, _, _ := s3client.ErrorDocument(body); {
	case resp.StatusCode == http.StatusForbidden && bucket != "" && code == "AccessDenied":
		return nil
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("backend refuses the configured credentials (%s)", code)
	case resp.StatusCode >= 500:
		return fmt.Errorf("backend answered %s", resp.Status)
	}
	return nil
}
