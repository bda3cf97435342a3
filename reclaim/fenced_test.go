//go:build integration

package reclaim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/reclaim"
	"github.com/sweepgate/sweepgate/sweep"
)

// TestRunFencedRunsUnderTheLeadersTerm: work handed to the leader runs in
// its loop under its term, so its fenced writes commit; a process that
// does not lead refuses it; and when the term ends in the middle of the
// work, its context ends and its next fenced write is refused.
func TestRunFencedRunsUnderTheLeadersTerm(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.Start(e.Config())
	cfgB := e.Config()
	cfgB.ID = "b"
	b := e.Run(cfgB)
	term, _ := a.Leader()
	key := e.Store.Keys().Root() + "fenced-work"
	write := func(ctx context.Context, tm sweep.Term) error {
		_, err := sweep.FencedTxn(ctx, e.Cli, tm, nil, clientv3.OpPut(key, fmt.Sprint(tm.N)))
		return err
	}
	err := a.RunFenced(t.Context(), func(ctx context.Context, tm sweep.Term) error {
		if tm.N != term {
			return fmt.Errorf("ran under term %d, the leader's is %d", tm.N, term)
		}
		return write(ctx, tm)
	})
	if err != nil {
		t.Fatalf("fenced work on the leader: %v", err)
	}
	if resp, err := e.Cli.Get(t.Context(), key); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != fmt.Sprint(term) {
		t.Fatalf("the fenced write is not stored: %v %v", resp, err)
	}
	if err := b.RunFenced(t.Context(), write); !errors.Is(err, reclaim.ErrNotLeader) {
		t.Fatalf("fenced work on a process that does not lead: %v, want ErrNotLeader", err)
	}

	err = a.RunFenced(t.Context(), func(ctx context.Context, tm sweep.Term) error {
		e.RevokeLeader()
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
			return errors.New("the work's context outlived the term")
		}
		return write(context.Background(), tm)
	})
	if !errors.Is(err, reclaim.ErrFenced) {
		t.Fatalf("fenced work whose term ended: %v, want ErrFenced", err)
	}
}
