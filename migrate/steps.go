package migrate

import (
	"fmt"

	"github.com/sweepgate/sweepgate/etcdstore"
)

// A Step moves the stored state from keyspace schema From to From+1 by
// rewriting the records under one prefix into the new schema's form. The
// new schema's binaries read both forms, so a record the step has not
// reached yet, or one a gateway wrote in the old form before it read the
// new schema, is still read correctly.
type Step struct {
	// From is the schema the step moves from; it moves to From+1.
	From int
	// Name says what the step changes, for the plan.
	Name string
	// Prefix is the prefix of the records the step rewrites.
	Prefix func(etcdstore.Keys) string
	// Rewrite returns the record stored at key in the new schema's form,
	// or nil when it is in that form already. A record of a layout this
	// binary does not read is an error wrapping etcdstore.ErrNewerRecord.
	Rewrite func(key string, value []byte) ([]byte, error)
}

// To is the schema the step moves to.
func (s Step) To() int { return s.From + 1 }

// steps are the registered steps, one per schema this release moves from.
var steps = []Step{compactParts}

// stepFrom returns the registered step that moves from schema n.
func stepFrom(n int) (Step, error) {
	for _, s := range steps {
		if s.From == n {
			return s, nil
		}
	}
	return Step{}, fmt.Errorf("migrate: this release has no migration from schema %d", n)
}

// compactParts moves schema 1 to 2: every part record in the compact
// layout (etcdstore.EncodePart, version 2).
var compactParts = Step{
	From:   1,
	Name:   "part records in the compact layout (part version 2)",
	Prefix: etcdstore.Keys.AllParts,
	Rewrite: func(key string, value []byte) ([]byte, error) {
		p, err := etcdstore.DecodePart(key, value)
		if err != nil {
			return nil, err
		}
		if p.Version >= 2 {
			return nil, nil
		}
		return etcdstore.EncodePart(p, 2)
	},
}
