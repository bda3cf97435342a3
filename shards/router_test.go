package shards

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sweepgate/sweepgate/s3err"
)

// memDir is an in-memory directory: Assign writes an entry only when there
// is none, like Directory's transaction.
type memDir struct {
	m      map[string]string
	writes int
	fail   error
}

func (d *memDir) Get(b string) (string, bool) { s, ok := d.m[b]; return s, ok }
func (d *memDir) Assign(_ context.Context, b, s string) (string, error) {
	if d.fail != nil {
		return "", d.fail
	}
	if cur, ok := d.m[b]; ok {
		return cur, nil
	}
	d.writes++
	d.m[b] = s
	return s, nil
}

// held is the state each shard holds: shard -> buckets.
type held map[string]map[string]bool

func (h held) stores(names ...string) []Store {
	out := make([]Store, len(names))
	for i, n := range names {
		out[i] = Store{Name: n, Holds: func(_ context.Context, b string) (bool, error) {
			if h[n] == nil {
				return false, errors.New("shard " + n + " does not answer")
			}
			return h[n][b], nil
		}}
	}
	return out
}

func TestRouterAssign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := held{"main": {"old": true}, "logs": {"stray": true}, "reg": {}}
	dir := &memDir{m: map[string]string{"pinned": "reg"}}
	r, err := NewRouter(h.stores("main", "logs", "reg"), map[string]string{"logs": "logs", "stray": "reg", "pinned": "logs"}, dir, nil)
	if err != nil {
		t.Fatal(err)
	}

	// A bucket no shard lists is the default's; its first write records it.
	if i := r.Lookup("fresh"); i != 0 {
		t.Errorf("Lookup(fresh) = %d, want 0", i)
	}
	if err := r.Assign(ctx, "fresh"); err != nil {
		t.Fatal(err)
	}
	if dir.m["fresh"] != "main" || dir.writes != 1 {
		t.Errorf("directory after the first write: %v (%d writes)", dir.m, dir.writes)
	}
	// A known entry costs no write and no question to another shard.
	h["reg"] = nil // would fail if asked
	if err := r.Assign(ctx, "fresh"); err != nil || dir.writes != 1 {
		t.Errorf("second Assign: %v, %d writes", err, dir.writes)
	}
	h["reg"] = map[string]bool{}

	// A listed bucket goes to its shard.
	if err := r.Assign(ctx, "logs"); err != nil || dir.m["logs"] != "logs" || r.Lookup("logs") != 1 {
		t.Errorf("Assign(logs): %v, directory %v", err, dir.m)
	}

	// Another shard holds state of the bucket: refused, nothing written.
	if err := r.Assign(ctx, "stray"); !errors.Is(err, ErrConflict) {
		t.Errorf("Assign(stray) = %v, want ErrConflict", err)
	}
	if _, ok := dir.m["stray"]; ok {
		t.Error("the directory recorded a bucket another shard holds state of")
	}
	// The directory names another shard than the configuration: refused,
	// and lookups follow the directory.
	if err := r.Assign(ctx, "pinned"); !errors.Is(err, ErrConflict) {
		t.Errorf("Assign(pinned) = %v, want ErrConflict", err)
	}
	if i := r.Lookup("pinned"); i != 2 {
		t.Errorf("Lookup(pinned) = %d, want the directory's shard 2", i)
	}
	// A shard that does not answer makes the first write retryable.
	h["reg"] = nil
	if err := r.Assign(ctx, "other"); !errors.Is(err, s3err.ErrStateUnavailable) {
		t.Errorf("Assign with a shard down = %v, want SlowDown", err)
	}
}

func TestRouterCheck(t *testing.T) {
	t.Parallel()
	r, err := NewRouter(held{}.stores("main", "logs"), map[string]string{"logs": "logs"}, &memDir{m: map[string]string{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Check(map[string]string{"logs": "logs", "a": "main"}); err != nil {
		t.Errorf("Check of an agreeing directory: %v", err)
	}
	err = r.Check(map[string]string{"logs": "main", "a": "logs"})
	for _, want := range []string{
		"bucket a: its state is on shard logs (shard directory), but etcd.shards puts it on shard main",
		"sweepgate shards move a --to main --apply",
		"bucket logs: its state is on shard main",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check error %v does not contain %q", err, want)
		}
	}
	if _, err := NewRouter(held{}.stores("main"), map[string]string{"x": "gone"}, &memDir{}, nil); err == nil {
		t.Error("NewRouter accepted a bucket on an unknown shard")
	}
}
