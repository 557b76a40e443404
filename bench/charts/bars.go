package charts

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Bar is one bar of a bar chart: a label and its value.
type Bar struct {
	Label string
	Value float64
}

// ReadBars reads a bar chart's data as CSV: a header row whose second
// column names the unit of the values (the axis label), then one row per
// bar, label and value, in the order they are drawn from the top. Lines
// starting with # are comments (say there where the figures come from).
func ReadBars(r io.Reader) (unit string, bars []Bar, err error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = 2
	cr.TrimLeadingSpace = true
	rows, err := cr.ReadAll()
	if err != nil {
		return "", nil, err
	}
	if len(rows) < 2 {
		return "", nil, errors.New("want a header row and at least one bar")
	}
	for i, row := range rows[1:] {
		v, err := strconv.ParseFloat(row[1], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return "", nil, fmt.Errorf("row %d: value %q is not a finite number of at least 0", i+2, row[1])
		}
		bars = append(bars, Bar{Label: row[0], Value: v})
	}
	return rows[0][1], bars, nil
}

// RenderBars draws bars as a horizontal bar chart in SVG, each bar labelled
// with its value, under title; unit labels the value axis.
func RenderBars(title, unit string, bars []Bar) ([]byte, error) {
	if len(bars) == 0 {
		return nil, errors.New("no bars to draw")
	}
	h := vg.Length(60) + vg.Length(22)*vg.Length(len(bars))
	c := vgsvg.New(width, h)
	dc := draw.NewCanvas(c, width, h)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	dc = draw.Crop(dc, margin, -margin, margin, -margin)

	tsty := textStyle(11, color.Black)
	tsty.XAlign = draw.XCenter
	dc.FillText(tsty, vg.Point{X: dc.Center().X, Y: dc.Max.Y}, title)
	dc = draw.Crop(dc, 0, 0, 0, -(tsty.Height(title) + gap))

	// Bars are drawn bottom up; the first row goes on top.
	vals := make(plotter.Values, len(bars))
	names := make([]string, len(bars))
	hi := 0.0
	for i, b := range bars {
		vals[len(bars)-1-i] = b.Value
		names[len(bars)-1-i] = b.Label
		hi = max(hi, b.Value)
	}
	p := plot.New()
	p.BackgroundColor = nil
	for _, st := range []*text.Style{&p.X.Label.TextStyle, &p.X.Tick.Label} {
		st.Font = sans(9)
	}
	p.X.Label.Text = unit
	p.X.Min = 0
	p.X.Max = max(hi, 1e-9) * 1.18 // room for the value labels
	p.X.Tick.Marker = plot.TickerFunc(yTicks)
	bc, err := plotter.NewBarChart(vals, vg.Length(14))
	if err != nil {
		return nil, err
	}
	bc.Horizontal = true
	bc.Color = palette[4]
	bc.LineStyle.Width = 0
	p.Add(bc)
	p.HideY()

	// The labels are drawn here rather than as the y axis' ticks, from the
	// left edge and with room to spare: the SVG places each text by its
	// start, and a viewer without the font measured here draws a wider one.
	nsty := textStyle(9, color.Black)
	nsty.YAlign = draw.YCenter
	var labelW vg.Length
	for _, n := range names {
		labelW = max(labelW, nsty.Width(n))
	}
	pc := draw.Crop(dc, labelW*1.35+gap, 0, 0, 0)
	p.Draw(pc)
	data := p.DataCanvas(pc)
	tx, ty := p.Transforms(&data)
	vsty := textStyle(8, color.Black)
	vsty.YAlign = draw.YCenter
	for i, v := range vals {
		y := ty(float64(i))
		dc.FillText(nsty, vg.Point{X: dc.Min.X, Y: y}, names[i])
		dc.FillText(vsty, vg.Point{X: tx(v) + 3, Y: y}, round6(v))
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
