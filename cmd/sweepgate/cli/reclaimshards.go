package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/sweepgate/sweepgate/admin/adminapi"
)

// shardStatuses prints every shard's reclaimer status (--shard all), and
// exits with the worst of their exit codes.
func (c *Client) shardStatuses(name string, f reclaimFlags, body []byte) int {
	var all adminapi.ShardStatuses
	if err := json.Unmarshal(body, &all); err != nil {
		fmt.Fprintf(c.Stderr, "sweepgate %s: the admin API at %s answered something that is not every shard's reclaimer status: %v\n", name, f.admin, err)
		return ExitError
	}
	if f.json {
		if code := c.writeIndented(name, body); code != ExitOK {
			return code
		}
	}
	exit := ExitOK
	for i, sh := range all.Shards {
		if !f.json {
			if i > 0 {
				fmt.Fprintln(c.Stdout)
			}
			fmt.Fprintf(c.Stdout, "== Shard %s ==\n", sh.Shard)
		}
		switch {
		case sh.Status == nil:
			msg := "no status"
			if sh.Error != nil {
				msg = sh.Error.Message
			}
			fmt.Fprintf(c.Stderr, "sweepgate %s: shard %s: %s\n", name, sh.Shard, msg)
			exit = max(exit, ExitError)
		case !f.json:
			writeStatus(c.Stdout, sh.Status, time.Now())
		}
		if sh.Status != nil && sh.Status.Pass != 0 {
			exit = max(exit, passExit(&sh.Status.Report))
		}
	}
	return exit
}
