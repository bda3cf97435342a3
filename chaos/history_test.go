//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/digestsweep"
	"github.com/sweepgate/sweepgate/etcdstore"
)

// revSample ties an etcd revision to wall time: a read whose answer was
// at revision rev happened between start and end.
type revSample struct {
	start, end time.Time
	rev        int64
}

// sampler reads the reclaimer election from etcd and asks both gateways
// whether they lead, every sampleEvery, and logs what changes. Its
// revisions place etcd's exact history (replayed at the end) in wall time,
// for the audit lines, which carry times, not revisions.
type sampler struct {
	sys  *system
	cli  *clientv3.Client
	keys etcdstore.Keys
	log  *campaignLog

	mu      sync.Mutex
	samples []revSample
	claims  string
	leader  string
	// doubleClaims counts samples in which both gateways said they lead
	// (a paused leader that has not noticed yet; the fence, not the
	// claim, is what matters).
	doubleClaims int
}

const sampleEvery = 250 * time.Millisecond

func (s *sampler) run(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.sample(ctx)
	}
}

func (s *sampler) sample(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.sampleEtcd(ctx)
	}()
	sts := make([]string, len(s.sys.gateways))
	leading := 0
	for i := range s.sys.gateways {
		st, err := s.sys.statusOf(ctx, i)
		switch {
		case err != nil:
			sts[i] = s.sys.names[i] + "?"
		case st.Reclaimer.Leading:
			sts[i] = fmt.Sprintf("%s:%d", s.sys.names[i], st.Reclaimer.Term)
			leading++
		default:
			sts[i] = s.sys.names[i] + "-"
		}
	}
	wg.Wait()
	claims := strings.Join(sts, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if leading > 1 {
		s.doubleClaims++
	}
	if claims != s.claims {
		s.claims = claims
		s.log.printf("leader", "gateways say (NAME:TERM leads, - follows, ? no answer): %s", claims)
	}
}

func (s *sampler) sampleEtcd(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	resp, err := s.cli.Get(ctx, s.keys.Election(), clientv3.WithPrefix())
	end := time.Now()
	if err != nil {
		return
	}
	leader := "none"
	var min int64 = math.MaxInt64
	for _, kv := range resp.Kvs {
		if kv.CreateRevision < min {
			min = kv.CreateRevision
			leader = fmt.Sprintf("term %d (%s)", kv.CreateRevision, kv.Value)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples = append(s.samples, revSample{start: start, end: end, rev: resp.Header.Revision})
	if leader != s.leader {
		s.leader = leader
		s.log.printf("leader", "etcd election at revision %d: %s leads", resp.Header.Revision, leader)
	}
}

func (s *sampler) revSamples() []revSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// span is the revisions [from, to) during which something held; to is 0
// while it still holds.
type span struct{ from, to int64 }

func (s span) has(rev int64) bool { return rev >= s.from && (s.to == 0 || rev < s.to) }

// termWrite is a write to etcd that carries a reclaimer term.
type termWrite struct {
	rev  int64
	term int64
	what string
}

// guardArm is the arming of a blob's guard, just before its bytes go.
type guardArm struct {
	rev    int64
	term   int64
	digest string
	// refsAlive lists the references to the digest recorded when the
	// guard was armed: there must be none.
	refsAlive []string
}

// history is etcd's exact history of what the checker needs, replayed at
// the end of the campaign from the revision the gateways started at.
type history struct {
	keys etcdstore.Keys
	// leaders is each term's time as leader, in revisions: from when its
	// election key became the oldest until it was deleted.
	leaders map[int64]span
	// leaderAt lists the changes of leader: from rev on, term leads (0:
	// nobody).
	leaderAt []termAt
	// refs is the lifetimes of each reference key (refs/DIGEST/BUCKET/KEY).
	refs map[string][]span
	// trashRefs is the lifetimes of each trash reference, by
	// DIGEST/BUCKET/KEY.
	trashRefs map[string][]span
	guards    []guardArm
	writes    []termWrite
	// transitions lists each upload's session transitions, by upload id;
	// trRevs the revision each was written at, index for index.
	transitions map[string][]etcdstore.Transition
	trRevs      map[string][]int64
	// decisions are the revisions at which a pass began or was resumed
	// (by a new term, or after an interruption): when it looks at the
	// clocks and decides.
	decisions []decision
	// deletions are the reclaimer's destructive steps: abort intents and
	// armed guards.
	deletions []deletion
	// decisions lists reclaimer decisions (marks, aborts) recorded
	// without a term.
	untermed []string
	// layoutsDiffer is the revisions during which the live gateways
	// published more than one layout; layoutKept the first revision at
	// which each pass's digest report said it keeps everything for it.
	layoutsDiffer []span
	layoutKept    map[int64]int64
	events        int
	last          int64
}

type termAt struct{ rev, term int64 }

// decision is a pass's first cursor, or a cursor of it resumed (by a new
// term, or after an interruption): the pass decides from then on.
type decision struct {
	rev, pass, term int64
	sweep           string
}

// deletion is one destructive step of a reclaimer pass.
type deletion struct {
	rev, pass, term int64
	what            string
}

// leaderOf returns the term that led at rev (0 for none).
func (h *history) leaderOf(rev int64) int64 {
	i := sort.Search(len(h.leaderAt), func(i int) bool { return h.leaderAt[i].rev > rev })
	if i == 0 {
		return 0
	}
	return h.leaderAt[i-1].term
}

// replay reads etcd's history under the gateways' prefix from rev from
// through the revision of a sentinel it writes outside that prefix (the
// watch covers it, so the sentinel's event says the replay is complete).
// Nothing in the campaign compacts etcd, so the whole history is there.
func replay(ctx context.Context, cli *clientv3.Client, keys etcdstore.Keys, from int64) (*history, error) {
	root := strings.TrimSuffix(keys.Root(), "/") // the watch covers ROOT/... and ROOT-chaos/...
	sentinel := root + "-chaos/end"
	put, err := cli.Put(ctx, sentinel, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return nil, fmt.Errorf("write the replay sentinel: %w", err)
	}
	until := put.Header.Revision

	h := &history{keys: keys, leaders: map[int64]span{}, refs: map[string][]span{}, trashRefs: map[string][]span{}, transitions: map[string][]etcdstore.Transition{}}
	h.trRevs = map[string][]int64{}
	h.layoutKept = map[int64]int64{}
	st := &replayState{h: h, election: map[string]int64{}, sessions: map[string][]etcdstore.Transition{}, refsByDigest: map[string]map[string]bool{}, cursors: map[string]cursorRec{}, passes: map[int64]bool{}}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for resp := range cli.Watch(wctx, root, clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if err := resp.Err(); err != nil {
			return nil, fmt.Errorf("replay etcd history from revision %d: %w", from, err)
		}
		for _, ev := range resp.Events {
			h.events++
			h.last = ev.Kv.ModRevision
			st.apply(ev)
			if h.last >= until {
				return h, nil
			}
		}
	}
	return nil, fmt.Errorf("replay etcd history: the watch ended at revision %d, before %d: %w", h.last, until, wctx.Err())
}

// replayState is what the replay keeps between events.
type replayState struct {
	h *history
	// election maps each live election key to its create revision.
	election map[string]int64
	leader   int64
	// sessions holds each session's last history, to find the
	// transitions each write adds.
	sessions     map[string][]etcdstore.Transition
	refsByDigest map[string]map[string]bool // digest -> live reference keys
	// cursors holds each sweep's live cursor; passes the pass numbers
	// seen in any.
	cursors map[string]cursorRec
	passes  map[int64]bool
	layouts layoutReplay
}

// cursorRec is what the replay reads of a sweep's cursor: the upload
// sweep counts its resumes at the top, the digest sweep in its report.
type cursorRec struct {
	Pass    int64 `json:"pass"`
	Term    int64 `json:"term"`
	Resumed int   `json:"resumed"`
	Report  struct {
		Resumed int    `json:"resumed"`
		Kept    string `json:"kept"`
	} `json:"report"`
}

// uploadCursor and digestCursor name the sweeps' cursors
// (etcdstore.Keys.Cursor).
const (
	uploadCursor = "uploads"
	digestCursor = digestsweep.CursorName
)

// applyCursor records the passes' decision points.
func (st *replayState) applyCursor(ev *clientv3.Event, key string, rev int64, put bool) {
	name := strings.TrimPrefix(key, st.h.keys.Cursor(""))
	if name != uploadCursor && name != digestCursor {
		// The record of the last rebuild outlives passes.
		return
	}
	prev, had := st.cursors[name]
	if !put {
		delete(st.cursors, name)
		return
	}
	var c cursorRec
	if json.Unmarshal(ev.Kv.Value, &c) != nil {
		return
	}
	st.cursors[name] = c
	if name == digestCursor {
		st.noteLayoutKept(c, rev)
	}
	// A pass decides when it starts (its first cursor, whichever sweep)
	// and when it is resumed (in a new term, or after an interruption).
	start := !st.passes[c.Pass]
	resumed := had && prev.Pass == c.Pass && (prev.Term != c.Term || prev.Resumed != c.Resumed || prev.Report.Resumed != c.Report.Resumed)
	st.passes[c.Pass] = true
	if start || resumed {
		st.h.decisions = append(st.h.decisions, decision{rev: rev, pass: c.Pass, term: c.Term, sweep: name})
	}
}

func (st *replayState) apply(ev *clientv3.Event) {
	h := st.h
	key := string(ev.Kv.Key)
	rev := ev.Kv.ModRevision
	put := ev.Type == mvccpb.PUT
	keys := h.keys
	switch {
	case strings.HasPrefix(key, keys.Election()):
		if put {
			st.election[key] = ev.Kv.CreateRevision
		} else {
			delete(st.election, key)
		}
		st.electLeader(rev)
	case strings.HasPrefix(key, keys.AllRefs()):
		d, ok := keys.ParseRef(key)
		if !ok {
			return
		}
		if st.refsByDigest[d] == nil {
			st.refsByDigest[d] = map[string]bool{}
		}
		lives := h.refs[key]
		if put && ev.Kv.CreateRevision == rev {
			h.refs[key] = append(lives, span{from: rev})
			st.refsByDigest[d][key] = true
		} else if !put {
			if n := len(lives); n > 0 && lives[n-1].to == 0 {
				lives[n-1].to = rev
			}
			delete(st.refsByDigest[d], key)
		}
	case strings.HasPrefix(key, keys.AllTrashRefs()):
		// TRASHREFS/DIGEST/BUCKET/KEY/TIME -> DIGEST/BUCKET/KEY
		rest := strings.TrimPrefix(key, keys.AllTrashRefs())
		id := rest[:max(strings.LastIndexByte(rest, '/'), 0)]
		lives := h.trashRefs[id]
		if put && ev.Kv.CreateRevision == rev {
			h.trashRefs[id] = append(lives, span{from: rev})
		} else if !put {
			if n := len(lives); n > 0 && lives[n-1].to == 0 {
				lives[n-1].to = rev
			}
		}
	case strings.HasPrefix(key, keys.Guards()):
		if !put {
			return
		}
		var g etcdstore.Guard
		if json.Unmarshal(ev.Kv.Value, &g) != nil {
			return
		}
		h.writes = append(h.writes, termWrite{rev: rev, term: g.Term, what: "guard of " + g.Digest})
		if ev.Kv.CreateRevision == rev {
			h.deletions = append(h.deletions, deletion{rev: rev, pass: g.Pass, term: g.Term, what: "guard of " + g.Digest + " armed"})
			arm := guardArm{rev: rev, term: g.Term, digest: g.Digest}
			for k := range st.refsByDigest[g.Digest] {
				arm.refsAlive = append(arm.refsAlive, k)
			}
			h.guards = append(h.guards, arm)
		}
	case strings.HasPrefix(key, keys.Tombstones()):
		if !put {
			return
		}
		var t etcdstore.Tombstone
		if json.Unmarshal(ev.Kv.Value, &t) != nil {
			return
		}
		h.writes = append(h.writes, termWrite{rev: rev, term: t.Term, what: fmt.Sprintf("tombstone of %s: %s", t.Digest, t.State)})
	case strings.HasPrefix(key, keys.Gateways()):
		st.applyGateway(ev, key, rev, put)
	case strings.HasPrefix(key, keys.AllSessions()):
		st.applySession(ev, key, rev, put)
	case strings.HasPrefix(key, keys.Cursor("")):
		st.applyCursor(ev, key, rev, put)
	}
}

// applySession records the transitions a write of a session adds, with
// the term each was made in.
func (st *replayState) applySession(ev *clientv3.Event, key string, rev int64, put bool) {
	if !put {
		delete(st.sessions, key)
		return
	}
	var s etcdstore.Session
	if json.Unmarshal(ev.Kv.Value, &s) != nil {
		return
	}
	prev := st.sessions[key]
	st.sessions[key] = s.History
	for _, tr := range s.History {
		if slices.ContainsFunc(prev, func(p etcdstore.Transition) bool {
			return p.At.Equal(tr.At) && p.From == tr.From && p.To == tr.To && p.Actor == tr.Actor && p.Term == tr.Term
		}) {
			continue
		}
		st.h.transitions[s.UploadID] = append(st.h.transitions[s.UploadID], tr)
		st.h.trRevs[s.UploadID] = append(st.h.trRevs[s.UploadID], rev)
		what := fmt.Sprintf("session %s/%s %s->%s by %s", s.Bucket, s.UploadID, tr.From, tr.To, tr.Actor)
		if tr.From == etcdstore.StateExpired && tr.To == etcdstore.StateAborting && tr.Term > 0 {
			st.h.deletions = append(st.h.deletions, deletion{rev: rev, pass: st.cursors[uploadCursor].Pass, term: tr.Term, what: "abort intent of " + s.UploadID})
		}
		if tr.Term > 0 {
			st.h.writes = append(st.h.writes, termWrite{rev: rev, term: tr.Term, what: what})
		}
		// Marking, and deleting what was marked, are the reclaimer's
		// alone, and only in a term.
		if tr.To == etcdstore.StateExpired || tr.From == etcdstore.StateExpired && tr.To == etcdstore.StateAborting {
			if tr.Term == 0 {
				st.h.untermed = append(st.h.untermed, fmt.Sprintf("%s at revision %d has no term", what, rev))
			}
		}
	}
}

// electLeader recomputes the leader after an election event: the oldest
// live key leads.
func (st *replayState) electLeader(rev int64) {
	var leader int64
	for _, cr := range st.election {
		if leader == 0 || cr < leader {
			leader = cr
		}
	}
	if leader == st.leader {
		return
	}
	h := st.h
	if st.leader != 0 {
		s := h.leaders[st.leader]
		s.to = rev
		h.leaders[st.leader] = s
	}
	if leader != 0 {
		h.leaders[leader] = span{from: rev}
	}
	h.leaderAt = append(h.leaderAt, termAt{rev: rev, term: leader})
	st.leader = leader
}

// times places a span of revisions in wall time with the samples: it began
// after the last read that did not see it yet, and ended before the first
// read that saw it over.
func placeSpan(sp span, samples []revSample, begin, end time.Time) (from, to time.Time) {
	from, to = begin, end
	for _, s := range samples {
		if s.rev < sp.from && s.start.After(from) {
			from = s.start
		}
		if sp.to != 0 && s.rev >= sp.to && s.end.Before(to) {
			to = s.end
		}
	}
	return from, to
}
