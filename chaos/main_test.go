//go:build chaos

package chaos

import (
	"testing"

	"github.com/sweepgate/sweepgate/e2e/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }
