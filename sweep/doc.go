// Package sweep holds what the reclaimer's sweeps share: the fence that
// makes etcd refuse the writes of a term that has ended (Term, FencedTxn),
// the description of one sweep run that the pass framework hands to a
// sweep (Run), the interface it runs a sweep through (Sweep), the
// breaker's rule (OverCeiling), and the checklist an explanation records
// (Checklist, Step, Values).
//
// A pass of the elected reclaimer runs its sweeps one after another under
// one term and one pass number. Each sweep keeps its own durable state in
// etcd and writes it only through FencedTxn, so a reclaimer that has lost
// its term cannot act; a sweep stopped by an error is resumed by the next
// attempt of the same pass, unless the error was made with Abandon.
//
// Of sweepgate, package sweep imports only etcdstore (the coverage record
// a bounded pass's slice reads and writes): the packages of the sweeps
// import it, never the other way round.
package sweep
