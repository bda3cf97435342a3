package cli

import (
	"testing"

	"github.com/sweepgate/sweepgate/logbuf"
)

// runCLI runs one client command in-process and returns its exit code and
// output.
func runCLI(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut logbuf.Buffer
	c := &Client{Stdout: &out, Stderr: &errOut, Environ: environ, Version: "v0.0.0-test"}
	code = runClient(t, c, args)
	return code, out.String(), errOut.String()
}

// runClient runs the client command args[0] names with c, found in
// Commands as package main finds it; "help NAME" writes NAME's help, as
// main's help command does. The command lines only main's dispatch
// answers otherwise (no command, an unknown one) are main's tests'.
func runClient(t *testing.T, c *Client, args []string) int {
	t.Helper()
	help := len(args) == 2 && args[0] == "help"
	for _, cmd := range Commands() {
		switch {
		case help && cmd.Name == args[1]:
			cmd.Help(c, c.Stdout)
			return ExitOK
		case !help && len(args) > 0 && cmd.Name == args[0]:
			return cmd.Run(c, t.Context(), args[1:])
		}
	}
	t.Fatalf("runClient %q: no such client command", args)
	return 0
}
