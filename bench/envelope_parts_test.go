//go:build bench

package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The envelope's part rate: after a sustained gateway round (whose
// database growth gives the bytes per part), envelopeRounds rounds of
// envelopeRoundTime through the gateway and directly on MinIO, one after
// the other, the side going first alternating, so that a slow moment of a
// shared machine weighs on both sides; the ratio is the median of the
// pairs' ratios.
const (
	envelopeRounds    = 7
	envelopeRoundTime = 3 * time.Second
	// envelopeMaxPart is S3's highest part number.
	envelopeMaxPart = 10_000
)

// partsRun is one side's clients: client w uploads 1 KiB parts to an
// upload of its own in buckets[w mod len(buckets)], its part numbers
// going on from round to round.
type partsRun struct {
	c       *s3.Client
	buckets []string
	prefix  string
	ids     []string
	next    []int32        // each client's next part number
	counts  []atomic.Int64 // parts uploaded per bucket, over all rounds
}

// newPartsRun creates the envelopeClients uploads of one side.
func newPartsRun(b *testing.B, c *s3.Client, buckets []string, prefix string) *partsRun {
	r := &partsRun{c: c, buckets: buckets, prefix: prefix, ids: make([]string, envelopeClients),
		next: make([]int32, envelopeClients), counts: make([]atomic.Int64, len(buckets))}
	for w := range r.ids {
		id, err := createUpload(b.Context(), c, r.bucketOf(w), r.key(w))
		if err != nil {
			b.Fatal(err)
		}
		r.ids[w], r.next[w] = id, 1
	}
	return r
}

func (r *partsRun) bucketOf(w int) string { return r.buckets[w%len(r.buckets)] }
func (r *partsRun) key(w int) string      { return fmt.Sprintf("%s/%02d", r.prefix, w) }

// round uploads parts from every client for d and returns the rate.
func (r *partsRun) round(b *testing.B, d time.Duration) float64 {
	body := bytes.Repeat([]byte("p"), 1024)
	var n atomic.Int64
	start := time.Now()
	stop := start.Add(d)
	err := inParallel(b.Context(), envelopeClients, envelopeClients, func(ctx context.Context, w int) error {
		for ; time.Now().Before(stop); r.next[w]++ {
			if r.next[w] > envelopeMaxPart {
				return fmt.Errorf("client %d of %s used every part number", w, r.prefix)
			}
			if _, err := r.c.UploadPart(ctx, &s3.UploadPartInput{
				Bucket: aws.String(r.bucketOf(w)), Key: aws.String(r.key(w)), UploadId: aws.String(r.ids[w]),
				PartNumber: aws.Int32(r.next[w]), Body: bytes.NewReader(body),
			}); err != nil {
				return fmt.Errorf("upload part %d of %s: %w", r.next[w], r.key(w), err)
			}
			r.counts[w%len(r.buckets)].Add(1)
			n.Add(1)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return float64(n.Load()) / time.Since(start).Seconds()
}

// perBucket returns the parts uploaded to each bucket so far.
func (r *partsRun) perBucket() []int64 {
	per := make([]int64, len(r.counts))
	for i := range r.counts {
		per[i] = r.counts[i].Load()
	}
	return per
}

// alternateParts runs envelopeRounds pairs of rounds of gw and direct,
// the first of each pair alternating, and returns the median rate of each
// side, the median of the pairs' ratios, and those ratios.
func alternateParts(b *testing.B, gw, direct *partsRun) (gwRate, directRate, ratioMedian float64, ratios []float64) {
	var gwRates, directRates []float64
	for i := range envelopeRounds {
		var g, d float64
		if i%2 == 0 {
			g = gw.round(b, envelopeRoundTime)
			d = direct.round(b, envelopeRoundTime)
		} else {
			d = direct.round(b, envelopeRoundTime)
			g = gw.round(b, envelopeRoundTime)
		}
		gwRates, directRates = append(gwRates, g), append(directRates, d)
		ratios = append(ratios, ratio(g, d))
	}
	return median(gwRates), median(directRates), median(ratios), ratios
}

// formatRatios prints ratios as "0.71 0.68 ...".
func formatRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(parts, " ")
}
