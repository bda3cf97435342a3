package digestsweep

import (
	"context"
	"fmt"
)

// RebuiltAfter reports whether a complete rebuild (every reference source
// read, none denied, none failed) started after etcd revision rev, and
// says what stands in the way when not. With no reference source there is
// nothing a rebuild could read back, so it holds at once. The restore mark
// is cleared only once it holds for the mark's revision: every reference
// the snapshot lost that a source on the backend still holds is then
// recorded again.
func (sw *Sweep) RebuiltAfter(ctx context.Context, rev int64) (bool, string, error) {
	if len(sw.cfg.Layout.RebuildSources()) == 0 {
		return true, "", nil
	}
	s := &digestSweep{Sweep: sw}
	last, ok, err := s.lastRebuild(ctx)
	if err != nil {
		return false, "", err
	}
	switch {
	case !ok:
		return false, "no rebuild has completed yet", nil
	case last.Layout != sw.cfg.Layout.Fingerprint():
		return false, "the last complete rebuild read another layout", nil
	case last.Started <= rev:
		return false, fmt.Sprintf("the last complete rebuild started at revision %d, not after the restore mark's %d", last.Started, rev), nil
	}
	return true, "", nil
}
