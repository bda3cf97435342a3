#!/usr/bin/env bash
# chaos/campaigns.sh: seeded chaos campaigns (go test -tags chaos -run
# TestChaos ./chaos/), one after another with fresh random seeds, for
# CHAOS_TIME in all; it stops at the first campaign that fails and prints
# the command that runs it again. `make chaos` runs it.
#
#   CHAOS_TIME      total time to spend (default 30m; s, m or h)
#   CHAOS_DURATION  workload of each campaign (default 2m; with setup, the
#                   final passes and the checks a campaign takes about a
#                   minute more)
#   CHAOS_CLIENTS   concurrent clients (default 6)
#   CHAOS_SEED      run this one seed once instead (to reproduce a failure)
#   CHAOS_TAGS      the build tags of the campaign's test files (default chaos)
#   SWEEPGATE_TEST_ARTIFACTS
#                   where the campaign logs go (default .data/chaos)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GO=${GO:-go}
tags=${CHAOS_TAGS:-chaos}
export CHAOS_DURATION=${CHAOS_DURATION:-2m}
export CHAOS_CLIENTS=${CHAOS_CLIENTS:-6}
export SWEEPGATE_TEST_ARTIFACTS=${SWEEPGATE_TEST_ARTIFACTS:-$PWD/.data/chaos}
mkdir -p "$SWEEPGATE_TEST_ARTIFACTS"

# seconds turns 90, 90s, 30m, 2h or 1m30s into seconds.
seconds() {
	local v=$1 total=0 n
	if [[ $v =~ ^[0-9]+$ ]]; then
		echo "$v"
		return
	fi
	while [[ $v =~ ^([0-9]+)([hms])(.*)$ ]]; do
		n=${BASH_REMATCH[1]}
		case ${BASH_REMATCH[2]} in
		h) n=$((n * 3600)) ;;
		m) n=$((n * 60)) ;;
		esac
		total=$((total + n))
		v=${BASH_REMATCH[3]}
	done
	if [[ -n $v || $total -eq 0 ]]; then
		echo "chaos: cannot read the duration '$1' (want e.g. 90s, 30m, 1h or 1m30s)" >&2
		return 1
	fi
	echo "$total"
}
total=$(seconds "${CHAOS_TIME:-30m}")
each=$(seconds "$CHAOS_DURATION")
# A hung campaign is cut off well after its workload, passes and checks.
timeout="$((each + 600))s"

run() {
	local seed=$1
	echo "== chaos campaign: seed $seed, $CHAOS_DURATION of workload, $CHAOS_CLIENTS clients ($(date -u +%H:%M:%S))"
	CHAOS_SEED=$seed "$GO" test -tags "$tags" -count=1 -v -run '^TestChaos$' -timeout "$timeout" ./chaos/
}

if [[ -n ${CHAOS_SEED:-} ]]; then
	run "$CHAOS_SEED"
	exit
fi

start=$SECONDS
seeds=()
while ((SECONDS - start < total)); do
	seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
	seeds+=("$seed")
	if ! run "$seed"; then
		echo
		echo "chaos: campaign with seed $seed FAILED after $(((SECONDS - start) / 60))m; logs in $SWEEPGATE_TEST_ARTIFACTS"
		echo "chaos: reproduce with: CHAOS_SEED=$seed CHAOS_DURATION=$CHAOS_DURATION CHAOS_CLIENTS=$CHAOS_CLIENTS make chaos"
		echo "chaos: seeds run before it (passed): ${seeds[*]:0:${#seeds[@]}-1}"
		exit 1
	fi
done
echo
echo "chaos: ${#seeds[@]} campaigns passed in $(((SECONDS - start) / 60))m: seeds ${seeds[*]}"
