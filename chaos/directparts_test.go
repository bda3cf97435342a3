//go:build chaos

package chaos

// Parts written around the gateway: a writer that reaches MinIO without
// passing through sweepgate (a presigned URL made against MinIO, a second
// cluster behind the same balancer) adds a part to an upload a client
// made through a gateway, while that client pauses; often right after
// the reclaimer marked the upload expired, when only the backend's own
// part times can tell the reclaimer the upload is alive.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// directPartBase is the first part number written around the gateway;
// the client's own parts are numbered below it and its complete names
// only those, so MinIO discards the direct ones.
const directPartBase = 100

// directPart is a part written straight to MinIO.
type directPart struct {
	n int
	// why says when it was written: right after the upload was marked
	// expired, or at a time drawn around the grace.
	why string
	// markRev, for a part written after its mark, is the etcd revision
	// of the read that found the session expired: the part was sent
	// after every write up to it.
	markRev int64
	// sent is when the request left; ack when MinIO's success arrived
	// (zero when it did not: the part may or may not be there).
	sent, ack time.Time
	err       string
}

// aroundWriter writes parts straight to MinIO with the backend's
// credentials, and reads the upload's session in etcd to time them.
type aroundWriter struct {
	d    direct
	cli  *clientv3.Client
	keys etcdstore.Keys
}

// sessionState reads an upload's session state ("" when none or on
// error) and the revision it was read at.
func (a *aroundWriter) sessionState(ctx context.Context, id string) (etcdstore.SessionState, int64) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := a.cli.Get(ctx, a.keys.Session(a.d.bucket, id))
	if err != nil || len(resp.Kvs) == 0 {
		return "", 0
	}
	var s etcdstore.Session
	if json.Unmarshal(resp.Kvs[0].Value, &s) != nil {
		return "", 0
	}
	return s.State, resp.Header.Revision
}

// writeAround runs, during a kindPause upload's pause that ends at
// pauseEnd, a part written straight to MinIO: afterMark, as soon as the
// session reads expired (nothing when it is not marked in time);
// otherwise at after past the upload's last activity.
func (c *client) writeAround(ctx context.Context, u *upload, pauseEnd time.Time, afterMark bool, after time.Duration) {
	a := c.w.around
	if a == nil || len(u.ok) == 0 {
		return
	}
	why := fmt.Sprintf("%s after its last activity", after)
	var markRev int64
	if afterMark {
		why = "right after its mark"
		for {
			state, rev := a.sessionState(ctx, u.id)
			if state == etcdstore.StateExpired {
				markRev = rev
				break
			}
			if time.Now().Add(300*time.Millisecond).After(pauseEnd) || !c.sleep(ctx, 100*time.Millisecond) {
				c.w.log.printf("around", "c%d %s up=%s not marked during its pause: no part written around the gateway", c.id, u.key, u.id)
				return
			}
		}
	} else {
		at := u.ok[len(u.ok)-1].sent.Add(after)
		if at.Add(300*time.Millisecond).After(pauseEnd) || !c.sleep(ctx, time.Until(at)) {
			return
		}
	}
	p := directPart{n: directPartBase + len(u.direct), why: why, markRev: markRev}
	body := bytes.Repeat([]byte{byte(p.n)}, 1024+c.rng.IntN(4096))
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	p.sent = time.Now()
	_, err := a.d.c.UploadPart(actx, &s3.UploadPartInput{
		Bucket: aws.String(a.d.bucket), Key: aws.String(u.key), UploadId: aws.String(u.id),
		PartNumber: aws.Int32(int32(p.n)), Body: bytes.NewReader(body),
	})
	recv := time.Now()
	cancel()
	if err == nil {
		p.ack = recv
	} else {
		p.err = describe(err)
	}
	u.direct = append(u.direct, p)
	c.w.count("part around the gateway " + describe(err))
	c.w.log.printf("around", "c%d %s up=%s part %d written straight to MinIO %s: %s %dms (acknowledged at %s)",
		c.id, u.key, u.id, p.n, why, describe(err), recv.Sub(p.sent).Milliseconds(), c.w.log.since(p.ack))
}
