package main

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/seed71701133/tablets"
)

// Input formats.
const (
	formatCSV   = "csv"
	formatJSONL = "jsonl"
)

// lineError is a bad input line.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// pointReader reads points from an input. next returns io.EOF at the end and a *lineError
// for a bad line.
type pointReader interface {
	next() (tablets.Point, error)
}

// inputFormat picks the format: the flag if given, else the file's extension, else the
// first byte of the input ('{' is JSON lines).
func inputFormat(flag, file string, br *bufio.Reader) (string, error) {
	switch strings.ToLower(flag) {
	case "csv":
		return formatCSV, nil
	case "jsonl", "json", "ndjson":
		return formatJSONL, nil
	case "", "auto":
	default:
		return "", fmt.Errorf("unknown --format %q (want csv or jsonl)", flag)
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".csv", ".txt":
		return formatCSV, nil
	case ".jsonl", ".json", ".ndjson":
		return formatJSONL, nil
	}
	// Peek only at what has arrived (a pipe may be slow), more while it is all blank.
	for n := 1; ; n = br.Buffered() + 1 {
		buf, err := br.Peek(n)
		if t := bytes.TrimLeft(buf, " \t\r\n\uFEFF"); len(t) > 0 {
			return sniff(t[0]), nil
		}
		if err != nil {
			return formatCSV, nil // blank or empty input: either works
		}
	}
}

func sniff(b byte) string {
	if b == '{' || b == '[' {
		return formatJSONL
	}
	return formatCSV
}

// newPointReader returns the reader of format over r, with numeric times in unit.
func newPointReader(format string, r io.Reader, unit string) pointReader {
	if format == formatJSONL {
		s := bufio.NewScanner(r)
		s.Buffer(make([]byte, 0, 64<<10), 16<<20)
		return &jsonReader{s: s, unit: unit}
	}
	c := csv.NewReader(r)
	c.FieldsPerRecord = -1
	c.TrimLeadingSpace = true
	c.ReuseRecord = true
	c.Comment = '#'
	return &csvReader{r: c, unit: unit, first: true, timeCol: 0, valueCol: 1}
}

// Column names a CSV header may use.
var (
	timeColumns  = []string{"time", "timestamp", "ts", "t", "datetime", "date"}
	valueColumns = []string{"value", "v", "val", "y"}
)

type csvReader struct {
	r                 *csv.Reader
	unit              string
	first             bool
	timeCol, valueCol int
	width             int // fields of a record
}

func (c *csvReader) next() (tablets.Point, error) {
	for {
		rec, err := c.r.Read()
		if err == io.EOF {
			return tablets.Point{}, io.EOF
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return tablets.Point{}, &lineError{line: pe.Line, err: pe.Err}
			}
			return tablets.Point{}, err
		}
		line, _ := c.r.FieldPos(0)
		if c.first {
			c.first = false
			rec[0] = strings.TrimPrefix(rec[0], "\uFEFF") // a byte order mark (Excel)
			if isHeader(rec, c.unit) {
				if err := c.header(rec); err != nil {
					return tablets.Point{}, &lineError{line: line, err: err}
				}
				continue
			}
			c.width = 2
		}
		if len(rec) != c.width {
			return tablets.Point{}, &lineError{line: line,
				err: fmt.Errorf("%s, want %d (time,value)", plural(len(rec), "field"), c.width)}
		}
		p, err := parsePoint(rec[c.timeCol], rec[c.valueCol], c.unit)
		if err != nil {
			return tablets.Point{}, &lineError{line: line, err: err}
		}
		return p, nil
	}
}

// isHeader: the first record is a header when neither its time nor its value parses.
func isHeader(rec []string, unit string) bool {
	if len(rec) < 2 {
		return false
	}
	_, terr := parseAbsTime(rec[0], unit)
	_, verr := parseValue(rec[1])
	return terr != nil && verr != nil
}

func (c *csvReader) header(rec []string) error {
	c.width = len(rec)
	find := func(names []string) int {
		for i, f := range rec {
			for _, n := range names {
				if strings.EqualFold(strings.TrimSpace(f), n) {
					return i
				}
			}
		}
		return -1
	}
	c.timeCol, c.valueCol = find(timeColumns), find(valueColumns)
	if c.timeCol < 0 || c.valueCol < 0 {
		if len(rec) == 2 {
			c.timeCol, c.valueCol = 0, 1 // any two names: time first
			return nil
		}
		return fmt.Errorf("header %q has no \"time\" and \"value\" columns", strings.Join(rec, ","))
	}
	return nil
}

func parsePoint(ts, vs, unit string) (tablets.Point, error) {
	t, err := parseAbsTime(ts, unit)
	if err != nil {
		return tablets.Point{}, fmt.Errorf("bad time: %w", err)
	}
	if err := checkStorable(t); err != nil {
		return tablets.Point{}, err
	}
	v, err := parseValue(vs)
	if err != nil {
		return tablets.Point{}, fmt.Errorf("bad value: %w", err)
	}
	return tablets.Point{Time: t, Value: v}, nil
}

// parseValue reads a float64: a decimal, or NaN, Inf, +Inf, -Inf, Infinity, -Infinity.
func parseValue(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("%q is out of the range of a float64", s)
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}

type jsonReader struct {
	s    *bufio.Scanner
	unit string
	line int
}

type jsonPoint struct {
	Time  json.RawMessage `json:"time"`
	Value json.RawMessage `json:"value"`
}

func (j *jsonReader) next() (tablets.Point, error) {
	for j.s.Scan() {
		j.line++
		b := bytes.TrimSpace(j.s.Bytes())
		if j.line == 1 {
			b = bytes.TrimPrefix(b, []byte("\uFEFF"))
		}
		if len(b) == 0 {
			continue
		}
		p, err := parseJSONPoint(b, j.unit)
		if err != nil {
			return tablets.Point{}, &lineError{line: j.line, err: err}
		}
		return p, nil
	}
	if err := j.s.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return tablets.Point{}, &lineError{line: j.line + 1, err: errors.New("line longer than 16 MiB")}
		}
		return tablets.Point{}, err
	}
	return tablets.Point{}, io.EOF
}

func parseJSONPoint(b []byte, unit string) (tablets.Point, error) {
	if b[0] == '[' {
		return tablets.Point{}, errors.New("a JSON array: write one object per line (JSON lines), like {\"time\":\"2024-05-01T00:00:00Z\",\"value\":1.5}")
	}
	var jp jsonPoint
	if err := json.Unmarshal(b, &jp); err != nil {
		return tablets.Point{}, fmt.Errorf("bad JSON: %v", err)
	}
	if len(jp.Time) == 0 || string(jp.Time) == "null" {
		return tablets.Point{}, errors.New(`no "time"`)
	}
	if len(jp.Value) == 0 || string(jp.Value) == "null" {
		return tablets.Point{}, errors.New(`no "value"`)
	}
	var ts, vs string
	if jp.Time[0] == '"' {
		if err := json.Unmarshal(jp.Time, &ts); err != nil {
			return tablets.Point{}, fmt.Errorf("bad time: %v", err)
		}
	} else {
		ts = string(jp.Time)
	}
	if jp.Value[0] == '"' {
		// Non-finite values are strings in JSON.
		if err := json.Unmarshal(jp.Value, &vs); err != nil {
			return tablets.Point{}, fmt.Errorf("bad value: %v", err)
		}
		if v, ok := nonFinite(vs); ok {
			t, err := parseAbsTime(ts, unit)
			if err != nil {
				return tablets.Point{}, fmt.Errorf("bad time: %w", err)
			}
			if err := checkStorable(t); err != nil {
				return tablets.Point{}, err
			}
			return tablets.Point{Time: t, Value: v}, nil
		}
		return tablets.Point{}, fmt.Errorf("bad value: %s is a string, want a number (or \"NaN\", \"Infinity\", \"-Infinity\")", jp.Value)
	}
	vs = string(jp.Value)
	if !isNumber(vs) {
		return tablets.Point{}, fmt.Errorf("bad value: %s is not a number", jp.Value)
	}
	return parsePoint(ts, vs, unit)
}

func nonFinite(s string) (float64, bool) {
	switch strings.ToLower(s) {
	case "nan":
		return math.NaN(), true
	case "infinity", "+infinity", "inf", "+inf":
		return math.Inf(1), true
	case "-infinity", "-inf":
		return math.Inf(-1), true
	}
	return 0, false
}
