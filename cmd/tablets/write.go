package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed71701133/tablets"
	"github.com/seed71701133/tablets/tsdb"
)

func (a *app) writeCommand() *cobra.Command {
	var (
		sf       storeFlags
		series   string
		labelSet string
		file     string
		format   string
		timeUnit string
		chunk    int
	)
	cmd := &cobra.Command{
		Use:   "write (--table T | --db NAME) --series S [--file F]\n  tablets write --db NAME --labels 'up{job=\"api\"}' [--file F]",
		Short: "Import points of one series from CSV or JSON lines",
		Long: `Import points of one series from a file (--file) or stdin, creating the table if missing.

With --db, the series may be named by its labels instead of --series: --labels takes a
label set written as a Prometheus selector of = matchers only, such as
'http_requests_total{job="api", code="500"}' (the metric name is the label __name__; a
label with an empty value is no label). The points go to the series key of that set,
registered in the database, whose 'tablets series', 'tablets labels' and selectors in
'tablets query' and 'tablets plot' find it.

Formats (--format, else from the file's extension .csv / .jsonl .json .ndjson, else from
the first byte of the input: '{' is JSON lines):
  csv    time,value per line; an optional header line ("time,value", or any header with
         columns named time and value, in any order, among others); # starts a comment
  jsonl  one object per line: {"time":"2024-05-01T00:00:00Z","value":1.5}; the time may
         be a string or a number; the value a number or "NaN", "Infinity", "-Infinity"

Times are RFC 3339 (a fraction of a second is allowed; a time without a zone is UTC) or
Unix times. ` + timeUnitHelp + `

Points are written in chunks of --chunk points, each one store Write (upserts: a point at
a time already stored replaces it). A bad line stops the import: the points before it are
written, and the error names the line and how many points were stored. Exit status 1.`,
		Example: `  tablets write --table metrics --series cpu --file cpu.csv
  printf 'time,value\n2024-05-01T00:00:00Z,1.5\n' | tablets write --table metrics --series cpu
  tablets write --table metrics --series cpu --file data.jsonl --time-unit ms
  tablets write --db metrics --labels 'up{job="api", instance="a"}' --file up.csv`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ls tsdb.Labels
			switch {
			case labelSet != "" && series != "":
				return usageErrorf(cmd, "--series and --labels are exclusive")
			case labelSet != "" && sf.db == "":
				return usageErrorf(cmd, "--labels needs --db (a --table store has no labels; name the series with --series)")
			case labelSet != "":
				var err error
				if ls, err = parseLabelSet(labelSet); err != nil {
					return usageErrorf(cmd, "--labels: %v", err)
				}
			case series == "" && sf.db != "":
				return usageErrorf(cmd, "--series or --labels is required")
			case series == "":
				return usageErrorf(cmd, "--series is required")
			}
			if err := checkUnit(timeUnit); err != nil {
				return usageErrorf(cmd, "%v", err)
			}
			if chunk < 1 {
				return usageErrorf(cmd, "--chunk must be at least 1")
			}
			return a.write(cmd, &sf, series, ls, file, format, timeUnit, chunk)
		},
	}
	addStoreFlags(cmd, &sf)
	f := cmd.Flags()
	f.StringVar(&series, "series", "", "series name (required unless --labels)")
	f.StringVar(&labelSet, "labels", "", `--db: the series of this label set, such as 'up{job="api"}' (instead of --series)`)
	f.StringVar(&file, "file", "", "input file (default stdin; - is stdin)")
	f.StringVar(&format, "format", "auto", "input format: csv, jsonl or auto")
	f.StringVar(&timeUnit, "time-unit", unitAuto, "unit of numeric times: auto, s, ms, us or ns")
	f.IntVar(&chunk, "chunk", 10000, "points per store Write")
	return cmd
}

// write imports points into series, or with a label set ls into the series of ls.
func (a *app) write(cmd *cobra.Command, sf *storeFlags, series string, ls tsdb.Labels, file, format, unit string, chunk int) error {
	ctx := cmd.Context()
	var (
		in   io.Reader = a.stdin
		name           = "stdin"
		size int64     = -1
	)
	if file != "" && file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, file
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
	}
	store, client, err := sf.open(cmd, a)
	if err != nil {
		return err
	}
	// shown names the series in messages: series "cpu", or up{job="api"} (series l0123...).
	shown := "series " + strconv.Quote(series)
	if ls != nil {
		db, ok := store.(*tsdb.DB)
		if !ok { // checked: --labels needs --db
			return usageErrorf(cmd, "--labels needs --db")
		}
		series, err = db.SeriesOf(ctx, ls)
		if errors.Is(err, tablets.ErrInvalidLabels) {
			return usageErrorf(cmd, "--labels: %v", err)
		}
		if err != nil {
			return err
		}
		shown = fmt.Sprintf("%s (series %s)", ls, series)
	}
	// Validate the series name before any request: a Write of no points only checks it.
	if err := store.Write(ctx, series); err != nil {
		return err
	}
	if client != nil { // a --db database creates its tables itself
		if err := tablets.EnsureTable(ctx, client); err != nil {
			return err
		}
	}

	if name == "stdin" && isTerminal(a.stdin) {
		fmt.Fprintln(a.stderr, "reading CSV (time,value) or JSON lines from the terminal; end with Ctrl-D")
	}
	bar := a.newProgress(size, "importing "+name, true)
	defer bar.Done()
	br := bufio.NewReaderSize(io.TeeReader(in, bar), 256<<10)
	fmtName, err := inputFormat(format, file, br)
	if err != nil {
		return usageErrorf(cmd, "%v", err)
	}
	r := newPointReader(fmtName, br, unit)

	start := time.Now()
	stored := 0
	buf := make([]tablets.Point, 0, chunk)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := store.Write(ctx, series, buf...)
		if err != nil {
			failed := len(buf)
			var we *tablets.WriteError
			if errors.As(err, &we) {
				failed = len(we.Failed)
			}
			stored += len(buf) - failed
			return fmt.Errorf("%s: %w (%s stored before the failure)", name, err, plural(stored, "point"))
		}
		stored += len(buf)
		buf = buf[:0]
		return nil
	}
	for {
		p, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			var le *lineError
			if !errors.As(err, &le) {
				return fmt.Errorf("read %s: %w", name, err)
			}
			// Store what came before the bad line, so the import can resume after it.
			if ferr := flush(); ferr != nil {
				return ferr
			}
			return fmt.Errorf("%s: %v; %s before it %s stored in %s", name, err, plural(stored, "point"), wasWere(stored), shown)
		}
		buf = append(buf, p)
		if len(buf) == chunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	bar.Done()
	elapsed := time.Since(start)
	where := "table " + sf.table
	if sf.db != "" {
		where = "database " + sf.db
	}
	fmt.Fprintf(a.stdout, "wrote %s to %s of %s (%s layout) in %s\n",
		plural(stored, "point"), shown, where, sf.layout, elapsed.Round(time.Millisecond))
	return nil
}

// plural prints n and the noun, plural unless n is 1: "1 point", "10,000 points".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(int64(n)) + " " + noun + "s"
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}
