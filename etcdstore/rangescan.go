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
// and asks for that stretch only. Past the prefix that the range's start
// and end share, keys are treated as fractions whose digits are the bytes
// the scan has seen in its keys so far (so sha256 digests count in hex,
// upload ids in their own characters, and no stretch's width is spent on
// bytes no key holds); a stretch is a width in that space (its log2, span,
// 0 being the whole range). A page that came back full (More) sets the
// width to the stretch its own keys covered; a stretch that came back
// short widens the next one, at most 16-fold. The first request of a
// scan covers the whole range (nothing is known yet) and a request
// reaching into a denser stretch than the last may count more than a
// page, but each key is counted by a bounded number of requests, so a
// scan costs etcd time in proportion to the keys it reads, not to their
// square.

// maxGrowth is the most (as log2) a stretch widens after an empty one.
const maxGrowth = 4

// rangeScan is ScanRange through the store's client.
func (s *Store) rangeScan(ctx context.Context, start, end string, rev, pageSize int64, fn func(*mvccpb.KeyValue) bool) (int64, error) {
	return ScanRange(ctx, s.cli.KV, start, end, rev, pageSize, fn)
}

// LatestRev, as the revision of a scan, reads each of its requests at the
// revision etcd is at when it answers, instead of the whole scan at one.
const LatestRev int64 = -1

// ScanRange reads the keys in [start, end) through kv in key order, at
// most pageSize (500 when zero or less) per request, at revision rev (0:
// the revision of its first request; LatestRev: see RangePager), calling
// fn for each until fn says stop. It returns the revision read (for
// LatestRev, that of its last request). Consecutive requests cover
// adjacent stretches, so no key is missed or read twice, and memory holds
// one page; etcd counts a bounded number of keys per key read (see above),
// where paging with one fixed end counts the rest of the range every page.
func ScanRange(ctx context.Context, kv clientv3.KV, start, end string, rev, pageSize int64, fn func(*mvccpb.KeyValue) bool) (int64, error) {
	p := NewRangePager(kv, start, end, rev, pageSize)
	for {
		kvs, at, err := p.Next(ctx)
		if err != nil {
			return 0, err
		}
		if len(kvs) == 0 {
			break
		}
		for _, kv := range kvs {
			if !fn(kv) {
				return at, nil
			}
		}
	}
	if rev := p.Rev(); rev > 0 {
		return rev, nil
	}
	// Nothing was asked (an empty range): still report a revision.
	resp, err := kv.Get(ctx, start, clientv3.WithCountOnly())
	if err != nil {
		return 0, fmt.Errorf("scan %q: %w", start, err)
	}
	return resp.Header.Revision, nil
}

// A RangePager reads the keys in [start, end) in key order as ScanRange
// does, a response at a time, for a caller that works page by page or
// skips keys. At a revision (given, or that of its first request) it
// returns exactly the keys of that revision. At LatestRev each request
// reads the latest revision: the stretches still follow one another, so
// a key that exists throughout the scan is returned exactly once, and one
// written or deleted during it at most once, as when paging with one
// fixed end at the latest revision.
type RangePager struct {
	kv         clientv3.KV
	start, end string
	from       string
	rev, read  int64
	latest     bool
	pageSize   int64
	keysOnly   bool
	span       float64 // the next stretch's log2 width (0: the whole range)
	empty      int     // consecutive requests that found no key
	// base is the prefix start and end share, which every key of the
	// range holds; num numbers what follows it, in the bytes seen (seen)
	// in the keys read so far.
	base string
	seen [256]bool
	num  *numbering
}

// NewRangePager returns a pager over [start, end) of pageSize keys (500
// when zero or less) a request, at revision rev (0: that of its first
// request; LatestRev: each request's own).
func NewRangePager(kv clientv3.KV, start, end string, rev, pageSize int64) *RangePager {
	if pageSize <= 0 {
		pageSize = defaultScanPage
	}
	p := &RangePager{kv: kv, start: start, end: end, from: start, rev: rev, pageSize: pageSize, num: escapedKeys}
	l := 0
	for l < len(start) && l < len(end) && start[l] == end[l] {
		l++
	}
	p.base = start[:l]
	// The lowest byte makes the key after a page's last exact; the highest
	// makes any byte not seen yet read as a byte above it, never below.
	p.seen[0], p.seen[255] = true, true
	if rev < 0 {
		p.rev, p.latest = 0, true
	}
	return p
}

// KeysOnly makes the pager read keys without their values.
func (p *RangePager) KeysOnly() *RangePager {
	p.keysOnly = true
	return p
}

// SkipTo moves the pager to key: the keys it returns next are at or after
// key. A key at or before where it stands changes nothing.
func (p *RangePager) SkipTo(key string) {
	if key > p.from {
		p.from = key
	}
}

// Rev returns the revision the pager reads at; for LatestRev, the one its
// last request read. It is 0 while no request was made and none was given.
func (p *RangePager) Rev() int64 {
	if p.rev > 0 {
		return p.rev
	}
	return p.read
}

// Next returns the next keys of the range, at most the page size, and the
// revision they were read at; no keys once the range is read. A request
// covers one stretch: a stretch that holds no key is passed over within
// the call.
func (p *RangePager) Next(ctx context.Context) ([]*mvccpb.KeyValue, int64, error) {
	for p.from < p.end {
		to, ok := p.stretchEnd()
		if !ok || to > p.end {
			to = p.end
		}
		opts := []clientv3.OpOption{clientv3.WithRange(to), clientv3.WithLimit(p.pageSize)}
		if p.rev > 0 {
			opts = append(opts, clientv3.WithRev(p.rev))
		}
		if p.keysOnly {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		resp, err := p.kv.Get(ctx, p.from, opts...)
		if err != nil {
			return nil, 0, fmt.Errorf("scan %q: %w", p.start, err)
		}
		p.read = resp.Header.Revision
		if p.rev > 0 {
			p.read = p.rev
		} else if !p.latest {
			p.rev = p.read
		}
		kvs := resp.Kvs
		p.learn(kvs)
		if resp.More && len(kvs) > 0 {
			// A full page: the next stretch is as wide as this page's keys.
			first, last := string(kvs[0].Key), string(kvs[len(kvs)-1].Key)
			p.span, p.empty = p.num.extent(first[len(p.base):], last[len(p.base):]), 0
			p.from = last + "\x00"
			return kvs, p.read, nil
		}
		// [from, to) is read whole. Widen the next stretch: at most
		// twofold after a short page, and after empty ones by a factor
		// that grows with each (2, 4, 8, then 16-fold), so that a gap in
		// the keys is crossed in few requests without leaping far into
		// the keys beyond it.
		growth := 0.0
		switch n := len(kvs); {
		case n == 0:
			p.empty++
			growth = float64(min(p.empty, maxGrowth))
		case 2*int64(n) < p.pageSize:
			p.empty, growth = 0, 1
		default:
			p.empty = 0
		}
		p.span = min(0, p.span+growth)
		p.from = to
		if len(kvs) > 0 {
			return kvs, p.read, nil
		}
	}
	return nil, p.Rev(), nil
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
// sweepgate key past its prefix): a pager's numbering until it has read a
// key; rawKeys numbers any bytes.
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

// stretchEnd returns where a stretch of log2 width span past from ends:
// keyAfter in n's numbering when that gives a key past from, else in raw
// bytes (from holds bytes n does not number). ok is false when the
// stretch runs past every key.
func (n *numbering) stretchEnd(from string, span float64) (string, bool) {
	if to, ok := n.keyAfter(from, span); !ok || to > from {
		return to, ok
	}
	return rawKeys.keyAfter(from, span)
}

// learn adds the bytes that kvs hold past the base to those the pager
// numbers keys in.
func (p *RangePager) learn(kvs []*mvccpb.KeyValue) {
	grew := false
	for _, kv := range kvs {
		if len(kv.Key) < len(p.base) {
			continue // not in the range: etcd returns none such
		}
		for _, b := range kv.Key[len(p.base):] {
			if !p.seen[b] {
				p.seen[b], grew = true, true
			}
		}
	}
	if grew {
		var alphabet []byte
		for b, ok := range p.seen {
			if ok {
				alphabet = append(alphabet, byte(b))
			}
		}
		p.num = newNumbering(string(alphabet))
	}
}

// stretchEnd returns where the pager's next stretch ends, in its
// numbering (numbering.stretchEnd); ok is false when the stretch runs to
// the end of the range.
func (p *RangePager) stretchEnd() (string, bool) {
	if len(p.from) < len(p.base) || p.from[:len(p.base)] != p.base {
		return "", false // not in the range: the rest of it is asked for
	}
	to, ok := p.num.stretchEnd(p.from[len(p.base):], p.span)
	return p.base + to, ok
}
