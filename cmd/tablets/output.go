package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seed71701133/tablets"
)

// Output formats.
const (
	outTable = "table"
	outCSV   = "csv"
	outJSON  = "json"
)

func checkOutFormat(f string) error {
	switch f {
	case outTable, outCSV, outJSON:
		return nil
	}
	return fmt.Errorf("unknown --format %q (want table, csv or json)", f)
}

// pointWriter prints points in one of the output formats. With withSeries false it leaves
// the series out of table and CSV output (one series: the CSV can be imported back as is).
type pointWriter struct {
	format     string
	withSeries bool
	seriesW    int // width of the series column of a table
	w          *bufio.Writer
	csv        *csv.Writer
	rec        []string
	n          int
	started    bool
}

func newPointWriter(w io.Writer, format string, series []string) *pointWriter {
	pw := &pointWriter{format: format, withSeries: len(series) > 1, w: bufio.NewWriterSize(w, 64<<10)}
	for _, s := range series {
		pw.seriesW = max(pw.seriesW, len(s))
	}
	pw.seriesW = max(pw.seriesW, len("SERIES"))
	return pw
}

// header writes the header line, once, before the first point (so that an error before
// any point prints nothing to stdout).
func (pw *pointWriter) header() {
	if pw.started {
		return
	}
	pw.started = true
	switch pw.format {
	case outCSV:
		pw.csv = csv.NewWriter(pw.w)
		if pw.withSeries {
			pw.rec = []string{"time", "series", "value"}
		} else {
			pw.rec = []string{"time", "value"}
		}
		_ = pw.csv.Write(pw.rec)
	case outTable:
		if pw.withSeries {
			fmt.Fprintf(pw.w, "%-30s  %-*s  %s\n", "TIME", pw.seriesW, "SERIES", "VALUE")
		} else {
			fmt.Fprintf(pw.w, "%-30s  %s\n", "TIME", "VALUE")
		}
	}
}

// formatValue prints v exactly: the shortest decimal that reads back as v, NaN, +Inf, -Inf.
func formatValue(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// jsonValue is formatValue for JSON: non-finite values are the strings "NaN", "Infinity"
// and "-Infinity", which write reads back.
func jsonValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return `"NaN"`
	case math.IsInf(v, 1):
		return `"Infinity"`
	case math.IsInf(v, -1):
		return `"-Infinity"`
	}
	return formatValue(v)
}

func (pw *pointWriter) write(series string, p tablets.Point) error {
	pw.header()
	pw.n++
	ts := p.Time.UTC().Format(time.RFC3339Nano)
	switch pw.format {
	case outCSV:
		if pw.withSeries {
			pw.rec[0], pw.rec[1], pw.rec[2] = ts, series, formatValue(p.Value)
		} else {
			pw.rec[0], pw.rec[1] = ts, formatValue(p.Value)
		}
		return pw.csv.Write(pw.rec)
	case outJSON:
		name, _ := json.Marshal(series)
		_, err := fmt.Fprintf(pw.w, `{"series":%s,"time":"%s","value":%s}`+"\n", name, ts, jsonValue(p.Value))
		return err
	default:
		var err error
		if pw.withSeries {
			_, err = fmt.Fprintf(pw.w, "%-30s  %-*s  %s\n", ts, pw.seriesW, series, formatValue(p.Value))
		} else {
			_, err = fmt.Fprintf(pw.w, "%-30s  %s\n", ts, formatValue(p.Value))
		}
		return err
	}
}

// flush writes out what is buffered. done says the output is complete: a CSV gets its
// header even with no points.
func (pw *pointWriter) flush(done bool) error {
	if done && pw.format == outCSV {
		pw.header()
	}
	if pw.csv != nil {
		pw.csv.Flush()
		if err := pw.csv.Error(); err != nil {
			return err
		}
	}
	return pw.w.Flush()
}

// thousands prints n with thousands separators: 86,400.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// humanBytes prints a byte count in SI units: 1.2 MB.
func humanBytes(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		f /= unit
		if f < unit || u == "TB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return ""
}

// humanDuration rounds d for a table: 12ms, 1.23s, 35.1s.
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < 10*time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}
