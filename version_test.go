package sweepgate

import (
	"regexp"
	"testing"
)

// semver is MAJOR.MINOR.PATCH with an optional pre-release, as
// semver.org spells it, without a "v".
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

func TestVersionIsSemver(t *testing.T) {
	if v := Version(); !semver.MatchString(v) {
		t.Errorf("VERSION holds %q, want MAJOR.MINOR.PATCH without a v", v)
	}
}
