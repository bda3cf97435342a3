package shards

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// Shard is one shard as the move and list commands reach it: its name,
// a client of its etcd and its keys.
type Shard struct {
	Name string
	Cli  *clientv3.Client
	Keys etcdstore.Keys
}

// MoveRecord is the record of a move in progress, in the default shard
// (etcdstore.Keys.ShardMove): a move that stops is resumed from it.
type MoveRecord struct {
	Bucket string `json:"bucket"`
	From   string `json:"from"`
	To     string `json:"to"`
	// Phase is MoveCopy until every key is on the new shard, MoveDelete
	// once the directory names it, until the old keys are gone.
	Phase string `json:"phase"`
}

// The phases of a move.
const (
	MoveCopy   = "copy"
	MoveDelete = "delete"
)

// Plan is what a move does: the shards, the phase it starts in, and the
// keys of the bucket on the old shard by kind.
type Plan struct {
	Bucket, From, To string
	Phase            string
	Keys             map[string]int
	Resumed          bool
}

// moveBatch is how many keys one transaction of a move writes or deletes,
// well under etcd's default limit of operations per transaction.
const moveBatch = 64

// Mover moves one bucket's state between shards while no gateway runs.
type Mover struct {
	// Shards are every configured shard, the default first.
	Shards []Shard
	// Log, when set, is told each step.
	Log func(format string, args ...any)
}

func (m *Mover) logf(format string, args ...any) {
	if m.Log != nil {
		m.Log(format, args...)
	}
}

func (m *Mover) shard(name string) (Shard, bool) {
	i := slices.IndexFunc(m.Shards, func(s Shard) bool { return s.Name == name })
	if i < 0 {
		return Shard{}, false
	}
	return m.Shards[i], true
}

// Plan says what moving bucket to shard to does, changing nothing: it
// resumes a move recorded for the bucket, else starts from the shard the
// directory names.
func (m *Mover) Plan(ctx context.Context, bucket, to string) (Plan, error) {
	def := m.Shards[0]
	if _, ok := m.shard(to); !ok {
		return Plan{}, fmt.Errorf("no shard %s is configured", to)
	}
	p := Plan{Bucket: bucket, To: to, Phase: MoveCopy}
	resp, err := def.Cli.Get(ctx, def.Keys.ShardMove(bucket))
	if err != nil {
		return Plan{}, err
	}
	if len(resp.Kvs) > 0 {
		var rec MoveRecord
		if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
			return Plan{}, fmt.Errorf("the move record of %s: %w", bucket, err)
		}
		if rec.To != to {
			return Plan{}, fmt.Errorf("a move of %s to shard %s is in progress; finish it first (--to %s)", bucket, rec.To, rec.To)
		}
		p.From, p.Phase, p.Resumed = rec.From, rec.Phase, true
	} else {
		d := NewDirectory(def.Cli, def.Keys)
		if err := d.Load(ctx); err != nil {
			return Plan{}, err
		}
		from, ok := d.Get(bucket)
		if !ok {
			return Plan{}, fmt.Errorf("the shard directory has no entry for %s: no state of it was ever written, so nothing moves; configure it on shard %s", bucket, to)
		}
		if from == to {
			return Plan{}, fmt.Errorf("%s is on shard %s already", bucket, to)
		}
		p.From = from
	}
	src, ok := m.shard(p.From)
	if !ok {
		return Plan{}, fmt.Errorf("%s is on shard %s, which is not configured; configure it to move the bucket", bucket, p.From)
	}
	kvs, err := bucketKeys(ctx, src, bucket)
	if err != nil {
		return Plan{}, err
	}
	p.Keys = make(map[string]int)
	for _, kv := range kvs {
		kind, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), src.Keys.Root()), "/")
		p.Keys[kind]++
	}
	return p, nil
}

// Live returns the gateways that have a clock record in any shard: a
// move is refused while one runs.
func (m *Mover) Live(ctx context.Context) ([]string, error) {
	var live []string
	for _, s := range m.Shards {
		resp, err := s.Cli.Get(ctx, s.Keys.Gateways(), clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", s.Name, err)
		}
		for _, kv := range resp.Kvs {
			id, _ := url.PathUnescape(strings.TrimPrefix(string(kv.Key), s.Keys.Gateways()))
			live = append(live, s.Name+": "+id)
		}
	}
	return live, nil
}

// Apply carries out p: it records the move, copies every key of the
// bucket to the new shard, flips the directory entry, and deletes the old
// keys, each step resumable from the record. It refuses while a gateway
// is live or a key of the bucket is under a lease (a part or a complete
// in flight).
func (m *Mover) Apply(ctx context.Context, p Plan) error {
	live, err := m.Live(ctx)
	if err != nil {
		return err
	}
	if len(live) > 0 {
		return fmt.Errorf("gateways are running (%s): stop every gateway before moving a bucket", strings.Join(live, ", "))
	}
	def := m.Shards[0]
	src, _ := m.shard(p.From)
	dst, _ := m.shard(p.To)
	rec := MoveRecord{Bucket: p.Bucket, From: p.From, To: p.To, Phase: p.Phase}
	if err := m.record(ctx, def, rec); err != nil {
		return err
	}
	kvs, err := bucketKeys(ctx, src, p.Bucket)
	if err != nil {
		return err
	}
	if rec.Phase == MoveCopy {
		for _, kv := range kvs {
			if kv.Lease != 0 {
				return fmt.Errorf("key %s is under a lease (a request in flight when its gateway stopped); retry once its lease has expired", kv.Key)
			}
		}
		if err := m.copy(ctx, src, dst, kvs); err != nil {
			return err
		}
		if err := m.flip(ctx, def, p); err != nil {
			return err
		}
		rec.Phase = MoveDelete
		if err := m.record(ctx, def, rec); err != nil {
			return err
		}
	}
	if err := m.deleteOld(ctx, src, kvs); err != nil {
		return err
	}
	_, err = def.Cli.Delete(ctx, def.Keys.ShardMove(p.Bucket))
	m.logf("moved %s from shard %s to shard %s", p.Bucket, p.From, p.To)
	return err
}

func (m *Mover) record(ctx context.Context, def Shard, rec MoveRecord) error {
	b, _ := json.Marshal(rec)
	_, err := def.Cli.Put(ctx, def.Keys.ShardMove(rec.Bucket), string(b))
	return err
}

// copy writes each key to dst under dst's prefix, in batches: a key dst
// lacks is created, one it holds with the same value is left, and one it
// holds with another value stops the move (dst's state of the bucket is
// not this move's to overwrite).
func (m *Mover) copy(ctx context.Context, src, dst Shard, kvs []*mvccpb.KeyValue) error {
	for start := 0; start < len(kvs); start += moveBatch {
		batch := kvs[start:min(start+moveBatch, len(kvs))]
		for _, kv := range batch {
			key := dst.Keys.Root() + strings.TrimPrefix(string(kv.Key), src.Keys.Root())
			resp, err := dst.Cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
				Then(clientv3.OpPut(key, string(kv.Value))).
				Else(clientv3.OpGet(key)).Commit()
			if err != nil {
				return err
			}
			if !resp.Succeeded {
				got := resp.Responses[0].GetResponseRange().Kvs
				if len(got) == 0 || string(got[0].Value) != string(kv.Value) {
					return fmt.Errorf("shard %s holds %s with another value than shard %s: not overwritten; settle it by hand", dst.Name, key, src.Name)
				}
			}
		}
		m.logf("copied %d of %d keys to shard %s", start+len(batch), len(kvs), dst.Name)
	}
	return nil
}

// flip points the directory entry at the new shard, if it still names the
// old one.
func (m *Mover) flip(ctx context.Context, def Shard, p Plan) error {
	key := def.Keys.ShardBucket(p.Bucket)
	resp, err := def.Cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", p.From)).
		Then(clientv3.OpPut(key, p.To)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		got := resp.Responses[0].GetResponseRange().Kvs
		if len(got) == 0 || string(got[0].Value) != p.To {
			return fmt.Errorf("the directory entry of %s changed during the move", p.Bucket)
		}
	}
	m.logf("the shard directory names shard %s for %s", p.To, p.Bucket)
	return nil
}

// deleteOld deletes the copied keys from the old shard, each only if it is
// unchanged since it was read.
func (m *Mover) deleteOld(ctx context.Context, src Shard, kvs []*mvccpb.KeyValue) error {
	for start := 0; start < len(kvs); start += moveBatch {
		batch := kvs[start:min(start+moveBatch, len(kvs))]
		cmps := make([]clientv3.Cmp, len(batch))
		ops := make([]clientv3.Op, len(batch))
		for i, kv := range batch {
			cmps[i] = clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)
			ops[i] = clientv3.OpDelete(string(kv.Key))
		}
		resp, err := src.Cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return err
		}
		if !resp.Succeeded {
			return errors.New("a key of the bucket on shard " + src.Name + " changed while it was moved; run the move again")
		}
	}
	m.logf("deleted %d keys from shard %s", len(kvs), src.Name)
	return nil
}

// bucketKeys reads every key of bucket's state on s: its sessions with
// their parts, activity, parts in flight and completes in flight, its
// reference objects' records and trash, the references and trash
// references from its objects, and the operators' orphan decisions.
func bucketKeys(ctx context.Context, s Shard, bucket string) ([]*mvccpb.KeyValue, error) {
	k := s.Keys
	get := func(prefix string) ([]*mvccpb.KeyValue, error) {
		resp, err := s.Cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return nil, err
		}
		return resp.Kvs, nil
	}
	var out []*mvccpb.KeyValue
	sessions, err := get(k.Sessions(bucket))
	if err != nil {
		return nil, err
	}
	out = append(out, sessions...)
	for _, kv := range sessions {
		id, _ := url.PathUnescape(strings.TrimPrefix(string(kv.Key), k.Sessions(bucket)))
		for _, prefix := range []string{k.Parts(id), k.Activity(id), k.InFlight(id), k.CompleteAttempt(id)} {
			kvs, err := get(prefix)
			if err != nil {
				return nil, err
			}
			for _, kv := range kvs {
				// Activity and CompleteAttempt are whole keys: keep only
				// the key itself, not a longer upload id they prefix.
				if key := string(kv.Key); key == prefix || strings.HasSuffix(prefix, "/") {
					out = append(out, kv)
				}
			}
		}
	}
	for _, prefix := range []string{k.RefSources(bucket), k.TrashOf(bucket, ""), k.OrphanRecords() + url.PathEscape(bucket) + "/"} {
		kvs, err := get(prefix)
		if err != nil {
			return nil, err
		}
		out = append(out, kvs...)
	}
	// References are keyed by digest first: keep those of this bucket.
	seg := "/" + url.PathEscape(bucket) + "/"
	for _, prefix := range []string{k.AllRefs(), k.AllTrashRefs()} {
		kvs, err := get(prefix)
		if err != nil {
			return nil, err
		}
		for _, kv := range kvs {
			rest := strings.TrimPrefix(string(kv.Key), prefix)
			if _, after, ok := strings.Cut(rest, "/"); ok && strings.HasPrefix("/"+after, seg) {
				out = append(out, kv)
			}
		}
	}
	return out, nil
}
