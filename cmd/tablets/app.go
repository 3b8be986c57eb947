package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK          = 0
	exitError       = 1   // a runtime error: bad data, the service said no, ...
	exitUsage       = 2   // a bad flag or argument
	exitInterrupted = 130 // Ctrl-C (128 + SIGINT)
)

// app is what the subcommands share: the process's streams and environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) string
	now            time.Time // one instant per invocation: "now" and relative times use it
}

// run is the whole command: main only adds the signal handling and os.Exit. It returns the
// exit status; on error it has printed one line to stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) (code int) {
	defer func() {
		// A bug is still one line, not a stack trace.
		if v := recover(); v != nil {
			fmt.Fprintln(stderr, "tablets: internal error: "+oneLine(fmt.Errorf("%v", v)))
			code = exitError
		}
	}()
	if env == nil {
		env = func(string) string { return "" }
	}
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, env: env, now: time.Now()}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code = exitError
	var ue *usageError
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ctx.Err()) || isCanceled(err)):
		fmt.Fprintln(stderr, "tablets: interrupted")
		return exitInterrupted
	case errors.As(err, &ue):
		code = exitUsage
	case isCobraUsageError(err):
		code = exitUsage
		err = &usageError{cmd: "tablets", err: err}
	}
	fmt.Fprintln(stderr, "tablets: "+oneLine(err))
	return code
}

// isCanceled reports errors that say the context was canceled without wrapping
// context.Canceled (some SDK errors flatten their cause into text).
func isCanceled(err error) bool {
	return strings.Contains(err.Error(), context.Canceled.Error())
}

// usageError is a bad command line: exit status 2 and a hint to --help.
type usageError struct {
	cmd string // the command path, "tablets query"
	err error
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%v (see '%s --help')", e.err, e.cmd)
}

func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return &usageError{cmd: cmd.CommandPath(), err: fmt.Errorf(format, args...)}
}

// isCobraUsageError recognizes the usage errors cobra returns without a hook.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "required flag") ||
		strings.HasPrefix(msg, "unknown flag") || strings.HasPrefix(msg, "unknown shorthand flag")
}

var spaces = regexp.MustCompile(`\s*\n[\s\-]*`)

// oneLine renders err on one line: an Azure response error (whose text is a multi-line
// report of the request and the raw response) becomes "HTTP 404 TableNotFound (METHOD
// url)", and any other line breaks become "; ".
func oneLine(err error) string {
	msg := err.Error()
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		full := re.Error()
		short := shortResponseError(re)
		if strings.Contains(msg, full) {
			msg = strings.Replace(msg, full, short, 1)
		} else if i := strings.IndexByte(msg, '\n'); i >= 0 {
			// The SDK text was wrapped in a way we cannot find: keep the first line.
			msg = msg[:i] + ": " + short
		}
	}
	msg = strings.TrimSpace(msg)
	msg = spaces.ReplaceAllString(msg, "; ")
	msg = strings.NewReplacer(".; ", "; ", ":; ", ": ").Replace(msg)
	if len(msg) > 2000 {
		msg = msg[:2000] + "..."
	}
	return msg
}

func shortResponseError(re *azcore.ResponseError) string {
	s := fmt.Sprintf("HTTP %d", re.StatusCode)
	if re.StatusCode == 0 {
		s = "failed"
	} else if t := http.StatusText(re.StatusCode); t != "" && re.ErrorCode == "" {
		s += " " + t
	}
	if re.ErrorCode != "" {
		s += " " + re.ErrorCode
	}
	if re.RawResponse != nil && re.RawResponse.Request != nil {
		req := re.RawResponse.Request
		u := *req.URL
		u.RawQuery = "" // may hold a SAS token
		s += fmt.Sprintf(" (%s %s)", req.Method, u.String())
	}
	return s
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "tablets",
		Short: "Time series in Azure Table Storage: import, query, plot, benchmark",
		Long: `tablets stores time series in Azure Table Storage with the tablets library.

Start with 'tablets demo': it runs a local Azurite (installed from npm the first time),
writes a day of one series at 1 Hz with each store layout, reads it back, and prints what
each layout cost.

The other commands need an account: a connection string (--connection-string or
$AZURE_TABLES_CONNECTION_STRING), or an account URL (--account-url or
$AZURE_TABLES_ACCOUNT_URL, e.g. https://ACCOUNT.table.core.windows.net) signed in with
Azure AD through DefaultAzureCredential (environment, workload or managed identity, Azure
CLI, ...).

Times (--from, --to) are RFC 3339 ("2024-05-01T12:00:00Z"), a date ("2024-05-01", UTC),
"now", a duration relative to now ("-2h", "-90m", "-7d", "now-1w"), or Unix seconds or
milliseconds (told apart by magnitude, see 'tablets write --help').

Exit status: 0 on success, 1 on an error, 2 on a usage error, 130 when interrupted.`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return &usageError{cmd: cmd.CommandPath(), err: err}
	})
	root.AddCommand(
		a.demoCommand(),
		a.writeCommand(),
		a.queryCommand(),
		a.plotCommand(),
		a.latestCommand(),
		a.deleteCommand(),
		a.retainCommand(),
		a.rollupCommand(),
		a.maintainCommand(),
		a.seriesCommand(),
		a.labelsCommand(),
		a.serveCommand(),
		a.rulesCommand(),
		a.soakCommand(),
	)
	for _, c := range root.Commands() {
		if c.Args == nil { // commands that take arguments say so
			c.Args = noArgs
		}
	}
	return root
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf(cmd, "unexpected argument %q: every input is a flag", args[0])
	}
	return nil
}
