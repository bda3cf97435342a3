// Package sweepgate holds the version this tree builds. The VERSION file
// beside it is the record: a release bumps it, and the binary reads it
// from here, so a build from a clone without tags, or from a directory
// without .git (the image's build context), still says which release it is.
package sweepgate

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var versionFile string

// Version returns the semantic version this tree builds, from the VERSION
// file: no "v" prefix, no surrounding space.
func Version() string {
	return strings.TrimSpace(versionFile)
}
