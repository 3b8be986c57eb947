package main

import (
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// isTerminal reports whether w (an io.Writer or io.Reader) is a terminal: progress bars
// are drawn only there.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is a progress bar on stderr, or nothing when stderr is not a terminal. Its
// methods do nothing on a nil *progress.
type progress struct {
	bar *progressbar.ProgressBar
}

// newProgress returns a bar of max units (-1: unknown, a spinner) described by desc;
// bytes says the units are bytes (else points).
func (a *app) newProgress(max int64, desc string, bytes bool) *progress {
	if !isTerminal(a.stderr) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(a.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
	}
	if bytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionShowCount())
	} else {
		opts = append(opts, progressbar.OptionShowCount())
	}
	return &progress{bar: progressbar.NewOptions64(max, opts...)}
}

// Add advances the bar by n units.
func (p *progress) Add(n int) {
	if p != nil {
		_ = p.bar.Add(n)
	}
}

// Write advances the bar by len(b) (for io.TeeReader).
func (p *progress) Write(b []byte) (int, error) {
	p.Add(len(b))
	return len(b), nil
}

// Done clears the bar and stops it.
func (p *progress) Done() {
	if p != nil {
		_ = p.bar.Exit()
		_ = p.bar.Clear()
	}
}
