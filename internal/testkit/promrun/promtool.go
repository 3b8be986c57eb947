package promrun

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// RunPromtool runs promtool with args and returns its stdout. An error includes stderr.
func (b *Binaries) RunPromtool(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, b.Promtool, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("promrun: `promtool %s`: %w\n%s%s", strings.Join(args, " "), ctxErr(ctx, err),
			stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

// PromtoolQueryRange runs `promtool query range -o json --start --end --step serverURL query`
// and returns the matrix it prints. promtool drops the API's warnings.
func (b *Binaries) PromtoolQueryRange(ctx context.Context, serverURL, query string, start, end time.Time, step time.Duration) (Matrix, error) {
	out, err := b.RunPromtool(ctx, "query", "range", "-o", "json",
		"--start="+apiTime(start), "--end="+apiTime(end), "--step="+step.String(),
		serverURL, query)
	if err != nil {
		return nil, err
	}
	var m Matrix
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("promrun: decode promtool output: %w\n%s", err, truncate(out, 500))
	}
	return m, nil
}

// PromtoolQueryRange is [Binaries.PromtoolQueryRange] with the binaries of [Install].
func PromtoolQueryRange(ctx context.Context, serverURL, query string, start, end time.Time, step time.Duration) (Matrix, error) {
	b, err := Install(ctx)
	if err != nil {
		return nil, err
	}
	return b.PromtoolQueryRange(ctx, serverURL, query, start, end, step)
}

// PromtoolQueryRange runs [Binaries.PromtoolQueryRange] against this server.
func (p *Prometheus) PromtoolQueryRange(ctx context.Context, query string, start, end time.Time, step time.Duration) (Matrix, error) {
	return p.Bin.PromtoolQueryRange(ctx, p.URL(), query, start, end, step)
}
