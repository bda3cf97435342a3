package sweep

import "time"

// Slice is what the report of a bounded pass says about the part of its
// sweep's keyspace it worked through: its budget and how much it listed,
// where it started and stopped, whether it completed a cycle of the whole
// keyspace, and when the whole keyspace was last covered.
type Slice struct {
	Budget int64 `json:"budget"`
	Listed int64 `json:"listed"`
	// From is where the pass started and To where it stopped ("" is the
	// start of the keyspace; To is "" when the pass completed the cycle).
	From string `json:"from"`
	To   string `json:"to"`
	// CompletedCycle: the pass reached the end of the keyspace.
	CompletedCycle bool `json:"completed_cycle"`
	// CycleStarted is the decision clock of the pass that began the
	// cycle this pass belongs to.
	CycleStarted time.Time `json:"cycle_started"`
	// Covered is when the whole keyspace was last covered: the
	// CycleStarted of the last complete cycle, this pass's own when it
	// completed one (zero: never). Every object that existed then, and
	// still existed when its cycle reached it, was listed.
	Covered time.Time `json:"covered,omitzero"`
	// Cycles counts the complete cycles, this pass's included.
	Cycles int64 `json:"cycles"`
	// Advanced: the coverage record moved with this pass, so the next
	// pass starts at To. A plan, and a pass that was refused, paused or
	// stopped, leaves it: the next pass starts at From again.
	Advanced bool `json:"advanced"`
}
