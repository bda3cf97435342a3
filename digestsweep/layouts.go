package digestsweep

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// layoutsDiffer compares the layout every live gateway publishes with its
// clock (etcdstore.GatewayClock.Layout) with the sweep's own, and returns
// why the pass keeps everything when any differs, or "". A gateway whose
// layout differs may store objects this sweep takes for plain (a source it
// lacks) or read blobs this sweep does not know, so nothing it wrote can
// be judged; a record without a layout is from a version that does not
// publish one, which is as unknown. The count of differing gateways is
// the layout-mismatch gauge.
func (s *digestSweep) layoutsDiffer(ctx context.Context) (string, error) {
	resp, err := s.cli().Get(ctx, s.keys().Gateways(), clientv3.WithPrefix())
	if err != nil {
		return "", fmt.Errorf("digestsweep: read the gateways' layouts: %w", err)
	}
	own := s.cfg.Layout.Fingerprint()
	var differ []string
	for _, kv := range resp.Kvs {
		var g etcdstore.GatewayClock
		if err := json.Unmarshal(kv.Value, &g); err != nil {
			differ = append(differ, fmt.Sprintf("%s (record does not decode)", kv.Key))
			continue
		}
		switch {
		case !g.Layouts:
			differ = append(differ, fmt.Sprintf("%s on %s (publishes no layout: an older version)", g.ID, g.Host))
		case g.Layout != own:
			differ = append(differ, fmt.Sprintf("%s on %s (layout %q)", g.ID, g.Host, g.Layout))
		}
	}
	s.metrics.LayoutMismatch(len(differ))
	if len(differ) == 0 {
		return "", nil
	}
	sort.Strings(differ)
	s.log.Error("gateways serve another layout than the reclaimer's: the digest sweep deletes nothing", "layout", own, "gateways", differ)
	return fmt.Sprintf("%d gateway(s) serve another layout than this reclaimer's (layout %q): %s; every gateway and reclaimer must have the same digests.namespaces, digests.sources and preset", len(differ), own, strings.Join(differ, ", ")), nil
}
