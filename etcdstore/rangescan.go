package etcdstore

import (
	"context"
	"fmt"
	"math"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Why a scan does not simply page with WithLimit: etcd (v3.6,
// mvcc.treeIndex.Revisions) visits every key of a range request's
// [key, end) to return its Count, whatever the limit. Paging M keys with
// one fixed end therefore visits about M²/(2·page) index entries, and a
// scan of a million sessions spends most of its time counting.
//
// ScanRange instead bounds each request's end: it estimates, from the keys
// the last page held, how wide a stretch of the key space holds one page,
// and asks for that stretch only. Keys are treated as base-256 fractions;
// a stretch is a width in that space (its log2, span, 0 being the whole
// key space). A page that came back full (More) sets the width to the
// stretch its own keys covered; a stretch that came back short widens the
// next one, at most 16-fold. The first request of a scan covers the whole
// range (nothing is known yet) and a request reaching into a denser
// stretch than the last may count more than a page, but each key is
// counted by a bounded number of requests, so a scan costs etcd time in
// proportion to the keys it reads, not to their square.

// maxGrowth is the most (as log2) a stretch widens after an empty one.
const maxGrowth = 4

// rangeScan is ScanRange through the store's client.
func (s *Store) rangeScan(ctx context.Context, start, end string, rev, pageSize int64, fn func(*mvccpb.KeyValue) bool) (int64, error) {
	return ScanRange(ctx, s.cli.KV, start, end, rev, pageSize, fn)
}

// ScanRange reads the keys in [start, end) through kv in key order, at
// most pageSize (500 when zero or less) per request, at revision rev (0:
// the revision of its first request), calling fn for each until fn says
// stop. It returns the revision read. Consecutive requests cover adjacent
// stretches, so no key is missed or read twice, and memory holds one page;
// etcd counts a bounded number of keys per key read (see above), where
// paging with one fixed end counts the rest of the range every page.
func ScanRange(ctx context.Context, kv clientv3.KV, start, end string, rev, pageSize int64, fn func(*mvccpb.KeyValue) bool) (int64, error) {
	if pageSize <= 0 {
		pageSize = defaultScanPage
	}
	from := start
	span := 0.0 // the whole key space: the first request covers [start, end)
	empty := 0  // consecutive requests that found no key
	for from < end {
		to, ok := stretchEnd(from, span)
		if !ok || to > end {
			to = end
		}
		opts := []clientv3.OpOption{clientv3.WithRange(to), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := kv.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("scan %q: %w", start, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if !fn(kv) {
				return rev, nil
			}
		}
		if resp.More && len(resp.Kvs) > 0 {
			// A full page: the next stretch is as wide as this page's keys.
			first, last := resp.Kvs[0].Key, resp.Kvs[len(resp.Kvs)-1].Key
			span, empty = escapedKeys.extent(string(first), string(last)), 0
			from = string(last) + "\x00"
			continue
		}
		// [from, to) is read whole. Widen the next stretch: at most
		// twofold after a short page, and after empty ones by a factor
		// that grows with each (2, 4, 8, then 16-fold), so that a gap in
		// the keys is crossed in few requests without leaping far into
		// the keys beyond it.
		growth := 0.0
		switch n := len(resp.Kvs); {
		case n == 0:
			empty++
			growth = float64(min(empty, maxGrowth))
		case 2*int64(n) < pageSize:
			empty, growth = 0, 1
		default:
			empty = 0
		}
		span = min(0, span+growth)
		from = to
	}
	if rev == 0 {
		// Nothing was asked (an empty range): still report a revision.
		resp, err := kv.Get(ctx, start, clientv3.WithCountOnly())
		if err != nil {
			return 0, fmt.Errorf("scan %q: %w", start, err)
		}
		rev = resp.Header.Revision
	}
	return rev, nil
}

// A numbering reads keys as fractions in some base: digit maps a byte to
// its digit, char a digit back to a byte, in the same order.
type numbering struct {
	radix int
	digit [256]int
	char  []byte
}

// newNumbering numbers keys made of alphabet (sorted): a byte outside it
// reads as the next byte inside it (the last for one above them all).
func newNumbering(alphabet string) *numbering {
	n := &numbering{radix: len(alphabet), char: []byte(alphabet)}
	for b := range 256 {
		d := 0
		for d < len(alphabet)-1 && alphabet[d] < byte(b) {
			d++
		}
		n.digit[b] = d
	}
	return n
}

// escapedKeys numbers keys made of path-escaped parts and '/' (every
// sweepgate key past its prefix), so that a stretch's width counts only
// the bytes such keys hold; rawKeys numbers any bytes.
var (
	escapedKeys = newNumbering("$%&+-./0123456789:=@ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz~")
	rawKeys     = func() *numbering {
		var all [256]byte
		for i := range all {
			all[i] = byte(i)
		}
		return newNumbering(string(all[:]))
	}()
)

// extentDigits is how many digits after their common prefix extent reads
// of two keys.
const extentDigits = 3

// extent returns the log2 width of the key space from a to b (a <= b),
// inclusive, measured on extentDigits digits past their common prefix.
func (n *numbering) extent(a, b string) float64 {
	l := 0
	for l < len(a) && l < len(b) && a[l] == b[l] {
		l++
	}
	value := func(k string) int64 {
		var v int64
		for i := l; i < l+extentDigits; i++ {
			v *= int64(n.radix)
			if i < len(k) {
				v += int64(n.digit[k[i]])
			}
		}
		return v
	}
	lr := math.Log2(float64(n.radix))
	return math.Log2(float64(max(value(b)-value(a), 0)+1)) - lr*float64(l+extentDigits)
}

// keyAfter returns the key a stretch of log2 width span past from ends at:
// from's first digits, enough that the width is a whole number of one to
// two digits, plus that width. ok is false when the stretch runs past the
// end of the key space. The key is greater than from unless from holds
// bytes the numbering does not (then rawKeys must be asked).
func (n *numbering) keyAfter(from string, span float64) (string, bool) {
	if span >= 0 {
		return "", false
	}
	lr := math.Log2(float64(n.radix))
	size := int(math.Ceil((lr - span) / lr))
	w := int(math.Round(math.Exp2(span + lr*float64(size))))
	digits := make([]int, size)
	for i := range min(size, len(from)) {
		digits[i] = n.digit[from[i]]
	}
	carry := w
	for i := size - 1; i >= 0 && carry > 0; i-- {
		sum := digits[i] + carry
		digits[i], carry = sum%n.radix, sum/n.radix
	}
	if carry > 0 {
		return "", false
	}
	key := make([]byte, size)
	for i, d := range digits {
		key[i] = n.char[d]
	}
	return string(key), true
}

// stretchEnd returns where a stretch of log2 width span past from ends,
// in the numbering of escaped keys when that gives a key past from, else
// in raw bytes.
func stretchEnd(from string, span float64) (string, bool) {
	if to, ok := escapedKeys.keyAfter(from, span); !ok || to > from {
		return to, ok
	}
	return rawKeys.keyAfter(from, span)
}
