//go:build chaos

package chaos

// The checker's blob rules: every blob a manifest on MinIO names is
// present, watched during the workload by the blob auditor and checked at
// the end, with a missing one judged against the reclaimer's records.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

var digestRE = regexp.MustCompile(`sha256:[0-9a-f]{64}`)

func blobKey(digest string) string { return "blobs/sha256/" + strings.TrimPrefix(digest, "sha256:") }

// sourcePrefixes are the reference sources the workload writes: the
// clients' manifests and the remembering producers' tags.
var sourcePrefixes = []string{"manifests/", tagPrefix}

// listSources lists the objects of every reference source on MinIO.
func (d direct) listSources(ctx context.Context) ([]listed, error) {
	var all []listed
	for _, p := range sourcePrefixes {
		l, err := d.list(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, l...)
	}
	return all, nil
}

// observation is a manifest on MinIO naming a blob that MinIO does not
// hold, seen at etcd revision rev.
type observation struct {
	at time.Time
	// read is when the read that found the blob missing was sent.
	read     time.Time
	rev      int64
	manifest string
	etag     string
	digest   string
}

// blobAuditor looks at every manifest on MinIO and at the blobs it names,
// during the workload (a blob referenced at any moment by a manifest that
// exists must be there) and at the end.
type blobAuditor struct {
	d   direct
	cli *clientv3.Client
	log *campaignLog

	mu     sync.Mutex
	obs    []observation
	rounds int
}

func (a *blobAuditor) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(2500 * time.Millisecond):
		}
		found, err := a.round(ctx)
		if err != nil {
			if ctx.Err() == nil {
				a.log.printf("audit", "blob audit round failed: %v", err)
			}
			continue
		}
		a.mu.Lock()
		a.rounds++
		a.obs = append(a.obs, found...)
		a.mu.Unlock()
	}
}

// round reads every manifest and checks its blobs. A blob found missing is
// confirmed by reading the manifest again (the same body still there), and
// the etcd revision is read after that, so that the history up to it
// holds whatever took the blob.
func (a *blobAuditor) round(ctx context.Context) ([]observation, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	manifests, err := a.d.listSources(ctx)
	if err != nil {
		return nil, err
	}
	var out []observation
	for _, m := range manifests {
		body, etag, found, err := a.d.read(ctx, m.key)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		for _, dg := range digestRE.FindAllString(string(body), -1) {
			read := time.Now()
			_, _, present, err := a.d.read(ctx, blobKey(dg))
			if err != nil {
				return nil, err
			}
			if present {
				continue
			}
			_, again, still, err := a.d.read(ctx, m.key)
			if err != nil {
				return nil, err
			}
			if !still || again != etag {
				continue
			}
			resp, err := a.cli.Get(ctx, "/sweepgate-chaos/rev")
			if err != nil {
				return nil, err
			}
			o := observation{at: time.Now(), read: read, rev: resp.Header.Revision, manifest: m.key, etag: etag, digest: dg}
			a.log.printf("audit", "manifest %s (etag %s) names %s, which MinIO does not hold (etcd revision %d)", m.key, etag, dg, o.rev)
			out = append(out, o)
		}
	}
	return out, nil
}

// checkBlobs: every blob named by a manifest that exists is present, at
// the end and whenever the auditor looked; and no blob's guard was ever
// armed while a reference to it was recorded.
func (c *checker) checkBlobs(ctx context.Context, aud *blobAuditor) {
	for _, g := range c.h.guards {
		if len(g.refsAlive) > 0 {
			c.v.violate("the guard of %s was armed at revision %d (term %d) while references to it were recorded: %s", g.digest, g.rev, g.term, strings.Join(g.refsAlive, ", "))
		}
	}
	final, err := aud.round(ctx)
	if err != nil {
		c.v.violate("cannot read the manifests on MinIO: %v", err)
	}
	// The content of every blob a manifest names, at the end.
	manifests, err := c.d.listSources(ctx)
	if err != nil {
		c.v.violate("cannot list the manifests on MinIO: %v", err)
	}
	named := 0
	for _, m := range manifests {
		body, _, found, err := c.d.read(ctx, m.key)
		if err != nil || !found {
			continue
		}
		for _, dg := range digestRE.FindAllString(string(body), -1) {
			b, _, present, err := c.d.read(ctx, blobKey(dg))
			if err != nil || !present {
				continue // the observation says what became of it
			}
			named++
			if "sha256:"+sha256Hex(b) != dg {
				c.v.violate("blob %s on MinIO does not hash to its digest", dg)
			}
		}
	}
	aud.mu.Lock()
	seen := append([]observation(nil), aud.obs...)
	rounds := aud.rounds
	aud.mu.Unlock()
	late := 0
	judge := func(o observation, when string) {
		verdict, isLate := c.judgeMissing(o)
		switch {
		case isLate && strings.HasPrefix(o.manifest, tagPrefix) && !c.w.deleteInFlight(o.manifest, o.at):
			// Its source confirms blobs: the write must have been
			// refused with BlobNotStored.
			c.v.violate("a confirmed tag names a blob reclaimed before it was written (%s): %s", when, verdict)
		case isLate:
			late++
			c.v.log.printf("check", "%s: %s", when, verdict)
		case when != "at the end" && c.w.deleteInFlight(o.manifest, o.at):
			c.v.log.printf("check", "%s: manifest %s was being deleted: %s", when, o.manifest, verdict)
		default:
			c.v.violate("referenced blob missing (%s): %s", when, verdict)
		}
	}
	for _, o := range seen {
		judge(o, "during the workload, "+c.v.log.since(o.at))
	}
	for _, o := range final {
		judge(o, "at the end")
	}
	c.v.note("%d manifests at the end naming %d present blobs, all hashing to their digests; %d audit rounds during the workload; %d manifests written after their blob was reclaimed (a producer slower than the placement grace, not a sweepgate fault)",
		len(manifests), named, rounds, late)
}

// judgeMissing explains a manifest naming a missing blob from etcd's
// history. A blob goes only after its guard is armed, which etcd refuses
// while a reference is recorded; so a manifest whose reference was
// recorded after the last guard of the blob was written after the blob
// was reclaimed (its producer was slower than the placement grace), and
// anything else means sweepgate let a referenced blob go.
func (c *checker) judgeMissing(o observation) (string, bool) {
	var arm *guardArm
	for i := range c.h.guards {
		g := &c.h.guards[i]
		if g.digest == o.digest && g.rev <= o.rev {
			arm = g
		}
	}
	ref := c.keys.Ref(o.digest, c.d.bucket, o.manifest)
	lives := c.h.refs[ref]
	var spans []string
	for _, s := range lives {
		spans = append(spans, fmt.Sprintf("[%d,%d)", s.from, s.to))
	}
	desc := fmt.Sprintf("manifest %s (etag %s) names %s, which MinIO does not hold at revision %d; its reference lived at revisions %s",
		o.manifest, o.etag, o.digest, o.rev, strings.Join(spans, " "))
	if arm == nil {
		return desc + "; no guard was ever armed for the blob: it went outside the reclaimer", false
	}
	desc += fmt.Sprintf("; the blob's last guard was armed at revision %d in term %d", arm.rev, arm.term)
	// A push acknowledged after the guard was armed came after the guard
	// was released (an armed guard refuses it): the blob was stored
	// again, and a delete that outlived its guard took it.
	_, armed := placeRev(arm.rev, c.smp.revSamples(), c.started, time.Now())
	c.w.mu.Lock()
	pushes := c.w.pushes[o.digest]
	c.w.mu.Unlock()
	for _, p := range pushes {
		if p.sent.After(armed) && p.recv.Before(o.read) {
			return desc + fmt.Sprintf(", and its producer pushed it again after that (sent %s, acknowledged %s), before it was found missing at %s with no guard armed since: a delete outlived the blob's guard",
				c.v.log.since(p.sent), c.v.log.since(p.recv), c.v.log.since(o.read)), false
		}
	}
	for _, s := range lives {
		if s.from > arm.rev && s.has(o.rev) {
			return desc + ": the manifest was written after the blob was reclaimed", true
		}
	}
	return desc, false
}
