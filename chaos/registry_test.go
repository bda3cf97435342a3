//go:build chaos

package chaos

// The registry-like half of the workload: clients push blobs and write,
// overwrite and delete the manifests that name them.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// blob is a blob the client pushed.
type blob struct {
	digest string // sha256:HEX
	key    string
	body   []byte
	pushed time.Time // when the last push was answered
}

// push is a blob's PUT that succeeded: when its last attempt was sent and
// answered.
type push struct{ sent, recv time.Time }

// manifestWrite is a manifest PUT that succeeded.
type manifestWrite struct {
	key        string
	digests    []string
	sent, recv time.Time
	// gw is the gateway that acknowledged it.
	gw string
}

// manifestDelete is a manifest DELETE; end is zero when it never got an
// answer that settled it.
type manifestDelete struct {
	key        string
	start, end time.Time
	ok         bool
}

// manifestKeys are the manifests a client writes: its own few tags, which
// it overwrites and deletes, and a few shared with every other client.
func (c *client) manifestKey() string {
	if c.rng.IntN(10) == 0 {
		return fmt.Sprintf("manifests/shared/t%d", c.rng.IntN(2))
	}
	return fmt.Sprintf("manifests/c%d/t%d", c.id, c.rng.IntN(4))
}

// newBlob makes a blob of its own content.
func (c *client) newBlob() *blob {
	body := make([]byte, 64+c.rng.IntN(16<<10))
	for i := range body {
		body[i] = byte(c.rng.Uint32())
	}
	copy(body, fmt.Sprintf("blob of client %d #%d;", c.id, len(c.blobs)))
	sum := sha256Hex(body)
	b := &blob{digest: "sha256:" + sum, key: "blobs/sha256/" + sum, body: body}
	c.blobs = append(c.blobs, b)
	return b
}

// push uploads a blob (again), as a registry client does before it writes
// a manifest that names it.
func (c *client) push(ctx context.Context, lib int, b *blob) error {
	res, err := c.call(ctx, lib, "PutObject "+b.key, nil, func(ctx context.Context, o s3ops) error {
		return o.put(ctx, b.key, b.body)
	})
	if err == nil {
		b.pushed = res.recv
		c.w.mu.Lock()
		c.w.lastWrite = time.Now()
		c.w.pushes[b.digest] = append(c.w.pushes[b.digest], push{sent: res.sent, recv: res.recv})
		c.w.mu.Unlock()
	}
	return err
}

// writeManifest pushes the blobs of a manifest (some new, some it pushed
// before) and writes the manifest. A write refused with SlowDown because
// a blob is being reclaimed makes it push the blobs again and retry.
func (c *client) writeManifest(ctx context.Context) {
	lib := c.rng.IntN(2)
	key := c.manifestKey()
	var layers []*blob
	for range 1 + c.rng.IntN(3) {
		if len(c.blobs) > 0 && c.rng.IntN(2) == 0 {
			layers = append(layers, c.blobs[c.rng.IntN(len(c.blobs))])
		} else {
			layers = append(layers, c.newBlob())
		}
	}
	var digests, entries []string
	for _, b := range layers {
		digests = append(digests, b.digest)
		entries = append(entries, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.layer.v1.tar","size":%d,"digest":%q}`, len(b.body), b.digest))
	}
	body := []byte(fmt.Sprintf(`{"schemaVersion":2,"annotations":{"by":"c%d","nonce":"%d"},"layers":[%s]}`, c.id, c.rng.Uint64(), strings.Join(entries, ",")))

	// Before each attempt: every blob pushed recently enough, as the
	// placement grace wants.
	before := func(ctx context.Context) error {
		for _, b := range layers {
			if time.Since(b.pushed) > repushAfter {
				if err := c.push(ctx, lib, b); err != nil {
					return err
				}
			}
		}
		return nil
	}
	res, err := c.call(ctx, lib, "PutObject "+key, before, func(ctx context.Context, o s3ops) error {
		err := o.put(ctx, key, body)
		if _, code := errInfo(err); code == "SlowDown" {
			// A blob it names is being reclaimed (or another write of
			// the manifest is in flight): push them all again first.
			for _, b := range layers {
				b.pushed = time.Time{}
			}
		}
		return err
	})
	outcome := "ok"
	if err != nil {
		outcome = describe(err)
		if !retryable(err) && ctx.Err() == nil {
			c.w.anomaly("c%d manifest %s: %v", c.id, key, err)
		}
	}
	c.w.count("manifest write " + outcome)
	c.w.log.printf("manifest", "c%d wrote %s -> %s names %s", c.id, key, outcome, strings.Join(digests, ","))
	if err == nil {
		c.w.mu.Lock()
		c.w.writes = append(c.w.writes, manifestWrite{key: key, digests: digests, sent: res.sent, recv: res.recv, gw: res.gw})
		c.w.lastWrite = time.Now()
		c.w.mu.Unlock()
	}
}

// deleteManifest deletes one of the manifests the client may have written.
func (c *client) deleteManifest(ctx context.Context) {
	key := c.manifestKey()
	err := c.deleteReference(ctx, key, "manifest")
	c.w.log.printf("manifest", "c%d deleted %s -> %s", c.id, key, describe(err))
}

// deleteReference deletes the reference object key (a manifest, what)
// through a gateway, recording the delete for the checker.
func (c *client) deleteReference(ctx context.Context, key, what string) error {
	d := &manifestDelete{key: key, start: time.Now()}
	c.w.mu.Lock()
	c.w.deletes = append(c.w.deletes, d)
	c.w.mu.Unlock()
	_, err := c.call(ctx, c.rng.IntN(2), "DeleteObject "+key, nil, func(ctx context.Context, o s3ops) error {
		return o.del(ctx, key)
	})
	c.w.mu.Lock()
	if err == nil || !retryable(err) {
		d.end, d.ok = time.Now(), err == nil
	}
	c.w.lastWrite = time.Now()
	c.w.mu.Unlock()
	if err != nil && !retryable(err) && ctx.Err() == nil {
		c.w.anomaly("c%d delete %s %s: %v", c.id, what, key, err)
	}
	c.w.count(what + " delete " + describe(err))
	return err
}

// deleteInFlight reports whether a DELETE of key was under way at t (or
// never settled), so that the manifest may have been on its way out.
func (w *workload) deleteInFlight(key string, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, d := range w.deletes {
		if d.key == key && !d.start.After(t) && (d.end.IsZero() || !d.end.Before(t)) {
			return true
		}
	}
	return false
}
