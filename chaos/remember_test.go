//go:build chaos

package chaos

// The registry that remembers: producers like a registry with a blob
// descriptor cache. They write tags (tags/, a reference source with
// confirm_blobs) naming blobs they pushed earlier without pushing them
// again, believing them stored, although the reclaimer may have deleted
// them since (nothing named them, or only tags deleted meanwhile). The
// gateway refuses such a tag with 409 BlobNotStored naming the blob; the
// producer uploads that blob again and writes the tag again, as a
// registry client does. They also push a blob that is stored already and
// then write a tag naming it. Every tag acknowledged must pull: each blob
// it names is read back from MinIO right after the acknowledgement, by
// the auditor during the workload and at the end.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// registryClients is how many remembering producers a campaign runs
// beside CHAOS_CLIENTS clients.
const registryClients = 2

// tagPrefix is the reference source the remembering producers write to;
// the campaign's layout confirms its blobs.
const tagPrefix = "tags/"

// maxConfirmRounds bounds how often a tag write is refused with
// BlobNotStored and its blob pushed again before the producer gives up.
const maxConfirmRounds = 6

// runRegistry is a remembering producer's loop.
func (c *client) runRegistry(ctx context.Context) {
	for !c.w.stopping() && ctx.Err() == nil {
		if !c.sleep(ctx, time.Duration(100+c.rng.IntN(400))*time.Millisecond) {
			return
		}
		switch r := c.rng.IntN(100); {
		case r < 25:
			// A push no tag names yet (an aborted push, a layer of an
			// image pushed later): unreferenced, it goes after the
			// placement grace, while the producer still remembers it.
			b := c.newBlob()
			err := c.push(ctx, c.rng.IntN(2), b)
			c.w.count("registry push " + describe(err))
		case r < 65:
			c.writeTag(ctx, false)
		case r < 80:
			c.writeTag(ctx, true)
		case r < 95:
			c.deleteTag(ctx)
		default:
			c.pullTag(ctx)
		}
	}
}

func (c *client) tagKey() string { return fmt.Sprintf("%sc%d/t%d", tagPrefix, c.id, c.rng.IntN(3)) }

// writeTag writes a tag naming one to three blobs: each a new one, pushed
// first, or one pushed before, remembered as stored and not pushed. With
// repush, one of them is pushed and then pushed again (a PUT of a blob
// that is stored) before the tag is written.
func (c *client) writeTag(ctx context.Context, repush bool) {
	lib := c.rng.IntN(2)
	key := c.tagKey()
	var layers, pushes []*blob
	for range 1 + c.rng.IntN(3) {
		if len(c.blobs) > 0 && c.rng.IntN(3) > 0 {
			layers = append(layers, c.blobs[c.rng.IntN(len(c.blobs))])
		} else {
			b := c.newBlob()
			layers = append(layers, b)
			pushes = append(pushes, b)
		}
	}
	if repush {
		b := layers[c.rng.IntN(len(layers))]
		pushes = append(pushes, b, b)
		c.w.count("registry tag naming a blob pushed again while stored")
	}
	body := c.tagBody(layers)
	for _, b := range pushes {
		if err := c.push(ctx, lib, b); err != nil {
			c.w.count("registry tag push failed " + describe(err))
			return
		}
	}
	var digests []string
	for _, b := range layers {
		digests = append(digests, b.digest)
	}
	var res callResult
	var err error
	for round := 0; ; round++ {
		res, err = c.call(ctx, lib, "PutObject "+key, nil, func(ctx context.Context, o s3ops) error {
			return o.put(ctx, key, body)
		})
		_, code := errInfo(err)
		if code != "BlobNotStored" {
			break
		}
		// The registry believed the blob stored: upload it again, as a
		// registry client does on this error, and write the tag again.
		missing := digestRE.FindString(err.Error())
		c.w.count("registry tag refused BlobNotStored")
		c.w.log.printf("manifest", "c%d tag %s refused: BlobNotStored %s; pushing it again (round %d)", c.id, key, missing, round+1)
		if round+1 >= maxConfirmRounds {
			c.w.anomaly("c%d tag %s: still BlobNotStored after %d uploads of its blobs: %v", c.id, key, round+1, err)
			break
		}
		c.checkRefusal(ctx, missing, layers)
		again := layers
		for _, b := range layers {
			if b.digest == missing {
				again = []*blob{b}
			}
		}
		for _, b := range again {
			if perr := c.push(ctx, lib, b); perr != nil {
				c.w.count("registry tag push failed " + describe(perr))
				return
			}
		}
	}
	outcome := describe(err)
	if err != nil && !retryable(err) && ctx.Err() == nil {
		c.w.anomaly("c%d tag %s: %v", c.id, key, err)
	}
	c.w.count("registry tag write " + outcome)
	c.w.log.printf("manifest", "c%d wrote tag %s -> %s names %s", c.id, key, outcome, strings.Join(digests, ","))
	if err != nil {
		return
	}
	c.w.mu.Lock()
	c.w.writes = append(c.w.writes, manifestWrite{key: key, digests: digests, sent: res.sent, recv: res.recv, gw: res.gw})
	c.w.lastWrite = time.Now()
	c.w.mu.Unlock()
	c.pullAfterAck(ctx, key, layers)
}

func (c *client) tagBody(layers []*blob) []byte {
	var entries []string
	for _, b := range layers {
		entries = append(entries, fmt.Sprintf(`{"mediaType":"application/vnd.oci.image.layer.v1.tar","size":%d,"digest":%q}`, len(b.body), b.digest))
	}
	return []byte(fmt.Sprintf(`{"schemaVersion":2,"annotations":{"by":"c%d","nonce":"%d"},"layers":[%s]}`, c.id, c.rng.Uint64(), strings.Join(entries, ",")))
}

// pullAfterAck reads every blob an acknowledged tag names straight from
// MinIO: its references were recorded and its blobs confirmed before the
// acknowledgement, and only this producer writes or deletes the tag, so
// each must be there, byte for byte.
func (c *client) pullAfterAck(ctx context.Context, key string, layers []*blob) {
	d := c.w.pull
	if d == nil {
		return
	}
	for _, b := range layers {
		rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
		body, _, found, err := d.read(rctx, b.key)
		cancel()
		switch {
		case err != nil:
			// MinIO unreachable now; the auditor reads it later.
		case !found:
			c.w.violation("acknowledged tag does not pull: %s, acknowledged, names %s, which MinIO does not hold right after the acknowledgement (pushes of it: %s)", key, b.digest, c.w.pushesOf(b.digest))
		case string(body) != string(b.body):
			c.w.violation("acknowledged tag %s names %s, whose bytes on MinIO differ from those pushed", key, b.digest)
		}
	}
}

// checkRefusal looks, after a BlobNotStored naming digest, whether MinIO
// holds the blob: a refusal of a blob that is there is an anomaly (a
// producer fails a push for nothing), not a violation.
func (c *client) checkRefusal(ctx context.Context, digest string, layers []*blob) {
	d := c.w.pull
	if d == nil || digest == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	_, _, found, err := d.read(rctx, blobKey(digest))
	cancel()
	if err == nil && found {
		c.w.anomaly("c%d: a tag was refused with BlobNotStored naming %s, which MinIO holds (pushes of it: %s)", c.id, digest, c.w.pushesOf(digest))
	}
}

// deleteTag deletes one of the producer's tags through a gateway.
func (c *client) deleteTag(ctx context.Context) {
	_ = c.deleteReference(ctx, c.tagKey(), "registry tag")
}

// pullTag pulls one of the producer's tags as a registry serving it
// would: the tag (read on MinIO), then every blob it names through a
// gateway. A tag whose blob a gateway answers NoSuchKey for, while the
// tag is still there unchanged, is a violation.
func (c *client) pullTag(ctx context.Context) {
	d := c.w.pull
	if d == nil {
		return
	}
	key := c.tagKey()
	rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	body, etag, found, err := d.read(rctx, key)
	cancel()
	if err != nil || !found {
		return
	}
	lib := c.rng.IntN(2)
	for _, dg := range digestRE.FindAllString(string(body), -1) {
		var sum string
		_, err := c.call(ctx, lib, "GetObject "+blobKey(dg), nil, func(ctx context.Context, o s3ops) error {
			var err error
			sum, _, err = o.get(ctx, blobKey(dg))
			return err
		})
		_, code := errInfo(err)
		switch {
		case code == "NoSuchKey":
			rctx, cancel := context.WithTimeout(ctx, attemptTimeout)
			_, again, still, rerr := d.read(rctx, key)
			cancel()
			if rerr == nil && still && again == etag {
				c.w.violation("tag does not pull: %s (etag %s) names %s, which a gateway answers NoSuchKey for (pushes of it: %s)", key, etag, dg, c.w.pushesOf(dg))
			}
		case err == nil && "sha256:"+sum != dg:
			c.w.violation("tag %s names %s, which reads back with sha256 %s", key, dg, sum)
		}
		c.w.count("registry pull blob " + describe(err))
	}
}

// pushesOf lists a blob's acknowledged pushes, for messages.
func (w *workload) pushesOf(digest string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.pushes[digest] {
		out = append(out, fmt.Sprintf("sent %s acknowledged %s", w.log.since(p.sent), w.log.since(p.recv)))
	}
	if len(out) == 0 {
		return "none acknowledged"
	}
	return strings.Join(out, ", ")
}
