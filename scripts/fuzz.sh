#!/usr/bin/env bash
# fuzz.sh: runs every Fuzz target in the module, one at a time (go test
# -fuzz takes one target in one package), each for FUZZTIME (default 30s).
#
#   FUZZTIME=10s scripts/fuzz.sh            all targets
#   scripts/fuzz.sh ./gateway/sigv4/...     only these packages
#
# It builds without -tags: the fuzz targets live in untagged test files,
# not in the e2e, chaos and bench suites.
#
# A failing input is saved under the package's testdata/fuzz/ by go test, so
# that the ordinary test run replays it from then on.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
fuzztime=${FUZZTIME:-30s}
go=${GO:-go}

if (($# == 0)); then
	set -- ./...
fi

ran=0
failed=()
while read -r pkg; do
	[[ -n $pkg ]] || continue
	targets=$("$go" test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for target in $targets; do
		echo "== $pkg $target ($fuzztime)"
		ran=$((ran + 1))
		if ! "$go" test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
			failed+=("$pkg $target")
		fi
	done
done < <("$go" list "$@")

echo "fuzz: ran $ran target(s) for $fuzztime each"
if ((${#failed[@]} > 0)); then
	printf 'fuzz: FAILED %s\n' "${failed[@]}"
	exit 1
fi
