package charts

import (
	"bytes"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart geometry.
const (
	width     = 16 * vg.Centimeter
	height    = 10 * vg.Centimeter
	margin    = vg.Length(6)  // around everything, in points
	gap       = vg.Length(10) // between plot and legend, title and plot
	thumbW    = vg.Length(22) // legend line sample
	thumbGap  = vg.Length(5)  // legend sample to text
	entryGap  = vg.Length(5)  // between legend entries
	labelGap  = vg.Length(4)  // minimum space between x tick labels
	logSpread = 20            // conns max/min beyond which x is logarithmic
)

// palette is the Okabe-Ito colorblind-safe set without its yellow, which
// is hard to see on white, plus a purple, so that all eight servers of
// ringbench -full get colors of their own.
var palette = []color.Color{
	color.RGBA{0, 0, 0, 255},       // black
	color.RGBA{230, 159, 0, 255},   // orange
	color.RGBA{86, 180, 233, 255},  // sky blue
	color.RGBA{0, 158, 115, 255},   // bluish green
	color.RGBA{0, 114, 178, 255},   // blue
	color.RGBA{213, 94, 0, 255},    // vermillion
	color.RGBA{204, 121, 167, 255}, // reddish purple
	color.RGBA{117, 112, 179, 255}, // purple
}

// glyphs are the point shapes, filled and outlined alternately.
var glyphs = []draw.GlyphDrawer{
	draw.CircleGlyph{},
	draw.SquareGlyph{},
	draw.PyramidGlyph{},
	draw.CrossGlyph{},
	draw.BoxGlyph{},
	draw.TriangleGlyph{},
	draw.RingGlyph{},
	draw.PlusGlyph{},
}

var gray = color.Gray{Y: 110}

func sans(size vg.Length) font.Font {
	return font.Font{Typeface: "Liberation", Variant: "Sans", Size: size}
}

func textStyle(size vg.Length, c color.Color) text.Style {
	return text.Style{
		Color:   c,
		Font:    sans(size),
		XAlign:  draw.XLeft,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
}

// series is one server's line in a chart.
type series struct {
	server  string
	style   int // index into palette and glyphs
	pts     plotter.XYs
	errPts  plotter.XYs // the points with more than one repeat
	errs    plotter.YErrors
	library bool // syscalls counted by the library, a lower bound
}

// entry is a legend line: a sample of the series' style (nil for a server
// without points), its name and an optional note under it.
type entry struct {
	name, note string
	thumbs     []plot.Thumbnailer
}

// renderChart draws metric m of group g as SVG, or returns nil if no
// server has a point. all is every server of the input, sorted: a server's
// index in it picks its color and glyph.
func renderChart(g *group, m metric, all []string) ([]byte, error) {
	c := vgsvg.New(width, height)
	ok, err := drawChart(c, g, m, all)
	if err != nil || !ok {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// drawChart draws metric m of group g on c, a width x height canvas, and
// reports whether there was anything to draw.
func drawChart(c vg.Canvas, g *group, m metric, all []string) (bool, error) {
	var ss []series
	var missing []string
	for _, srv := range g.servers {
		s := series{server: srv, style: slices.Index(all, srv)}
		for _, sum := range g.byServer[srv] {
			st := m.stat(&sum)
			x := float64(sum.Conns)
			if st.N == 0 || !finite(st.Median) {
				continue
			}
			s.pts = append(s.pts, plotter.XY{X: x, Y: st.Median})
			if st.N > 1 && finite(st.Min, st.Max) {
				s.errPts = append(s.errPts, plotter.XY{X: x, Y: st.Median})
				s.errs = append(s.errs, struct{ Low, High float64 }{
					Low: math.Max(0, st.Median-st.Min), High: math.Max(0, st.Max-st.Median),
				})
			}
			if m.name == "syscalls" && sum.SyscallsSource == "library" {
				s.library = true
			}
		}
		if len(s.pts) == 0 {
			missing = append(missing, srv)
			continue
		}
		ss = append(ss, s)
	}
	if len(ss) == 0 {
		return false, nil
	}

	p := plot.New()
	p.BackgroundColor = nil // the whole canvas is painted white below
	for _, st := range []*text.Style{
		&p.X.Label.TextStyle, &p.Y.Label.TextStyle, &p.X.Tick.Label, &p.Y.Tick.Label,
	} {
		st.Font = sans(st.Font.Size)
	}
	p.X.Label.Text = "connections"
	p.Y.Label.Text = m.ylabel
	p.X.Tick.Label.Font.Size = 9
	p.Y.Tick.Label.Font.Size = 9
	p.X.Label.TextStyle.Font.Size = 10
	p.Y.Label.TextStyle.Font.Size = 10
	p.Y.Tick.Marker = plot.TickerFunc(yTicks)

	var entries []entry
	var xs []float64
	for _, s := range ss {
		clr := palette[s.style%len(palette)]
		line, points, err := plotter.NewLinePoints(s.pts)
		if err != nil {
			return false, err
		}
		line.LineStyle = draw.LineStyle{Color: clr, Width: vg.Points(1.2)}
		points.GlyphStyle = draw.GlyphStyle{Color: clr, Radius: vg.Points(3), Shape: glyphs[s.style%len(glyphs)]}
		if len(s.errs) > 0 {
			bars := &plotter.YErrorBars{
				XYs:       s.errPts,
				YErrors:   s.errs,
				LineStyle: draw.LineStyle{Color: clr, Width: vg.Points(0.8)},
				CapWidth:  vg.Points(5),
			}
			p.Add(bars)
		}
		p.Add(line, points)
		e := entry{name: legendName(s.server), thumbs: []plot.Thumbnailer{line, points}}
		if s.library {
			e.note = "(library count, lower bound)"
		}
		entries = append(entries, e)
		for _, pt := range s.pts {
			if !slices.Contains(xs, pt.X) {
				xs = append(xs, pt.X)
			}
		}
	}
	for _, srv := range missing {
		entries = append(entries, entry{name: legendName(srv), note: "not measured"})
	}

	// The y axis starts at 0 (every metric is a count, a rate or a time),
	// with a little room above the highest error bar.
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
	}
	p.Y.Max *= 1.05

	slices.Sort(xs)
	if xs[0] > 0 && xs[len(xs)-1]/xs[0] > logSpread {
		p.X.Scale = plot.LogScale{}
	}

	dc := draw.NewCanvas(c, width, height)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	dc = draw.Crop(dc, margin, -margin, margin, -margin)

	// Title across the whole width, on two lines if it does not fit.
	title := describe(g.cell) + ": " + m.title
	tsty := textStyle(11, color.Black)
	tsty.XAlign = draw.XCenter
	if tsty.Width(title) > dc.Size().X {
		title = describe(g.cell) + ":\n" + m.title
	}
	dc.FillText(tsty, vg.Point{X: dc.Center().X, Y: dc.Max.Y}, title)
	dc = draw.Crop(dc, 0, 0, 0, -(tsty.Height(title) + gap))

	// Legend on the right, the plot in the rest.
	nameSty := textStyle(10, color.Black)
	noteSty := textStyle(8, gray)
	var legendW vg.Length
	for _, e := range entries {
		legendW = max(legendW, thumbW+thumbGap+max(nameSty.Width(e.name), noteSty.Width(e.note)))
	}
	pc := draw.Crop(dc, 0, -(legendW + gap), 0, 0)
	xTicks(p, pc, xs)
	data := p.DataCanvas(pc)
	p.Draw(pc)

	lc := draw.Crop(dc, dc.Size().X-legendW, 0, 0, 0)
	drawLegend(lc, data.Max.Y, entries, nameSty, noteSty)
	return true, nil
}

// legendName is the legend text for a server.
func legendName(server string) string {
	if server == "" {
		return "(unnamed server)"
	}
	return server
}

// drawLegend draws the entries top down from y in c.
func drawLegend(c draw.Canvas, y vg.Length, entries []entry, nameSty, noteSty text.Style) {
	x := c.Min.X
	for _, e := range entries {
		h := nameSty.Height(e.name)
		icon := draw.Canvas{Canvas: c.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: y - h},
			Max: vg.Point{X: x + thumbW, Y: y},
		}}
		for _, t := range e.thumbs {
			t.Thumbnail(&icon)
		}
		sty := nameSty
		if e.thumbs == nil {
			sty.Color = gray
		}
		c.FillText(sty, vg.Point{X: x + thumbW + thumbGap, Y: y}, e.name)
		y -= h
		if e.note != "" {
			c.FillText(noteSty, vg.Point{X: x + thumbW + thumbGap, Y: y}, e.note)
			y -= noteSty.Height(e.note)
		}
		y -= entryGap
	}
}

// xTicks puts the x ticks at the connection counts xs, labelling as many
// as fit from left to right without overlapping; the others get a tick
// mark only. pc is the canvas the plot will be drawn in.
func xTicks(p *plot.Plot, pc draw.Canvas, xs []float64) {
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: strconv.FormatFloat(x, 'f', -1, 64)}
	}
	// The axis length does not depend on the x labels, only on their
	// height, which is the same with or without some of them.
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	w := p.DataCanvas(pc).Size().X
	span := func(i int) (left, right vg.Length) {
		lw := p.X.Tick.Label.Width(ticks[i].Label)
		at := vg.Length(p.X.Norm(ticks[i].Value)) * w
		return at - lw/2, at + lw/2
	}
	// The last label, the largest count, is kept in any case; the others
	// from the left while they fit.
	last := len(ticks) - 1
	lastLeft, _ := span(last)
	right := vg.Length(math.Inf(-1))
	for i := range last {
		l, r := span(i)
		if l < right+labelGap || r+labelGap > lastLeft {
			ticks[i].Label = ""
			continue
		}
		right = r
	}
}

// yTicks labels about five round values between lo and hi (steps of 1,
// 2, 2.5 or 5 times a power of ten) with an unlabelled tick between each
// two, large values written short: 250k, 1.5M.
func yTicks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || !finite(lo, hi) {
		return nil
	}
	raw := (hi - lo) / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	large := math.Max(math.Abs(lo), math.Abs(hi)) >= 1e4
	var ticks []plot.Tick
	for i := math.Ceil(lo / step * 2); i/2*step <= hi*(1+1e-9); i++ {
		v := i / 2 * step
		if math.Abs(v) < step*1e-9 {
			v = 0 // not -0 or 1e-17
		}
		t := plot.Tick{Value: v}
		if math.Mod(i, 2) == 0 {
			t.Label = round6(v)
			if large {
				t.Label = short(v)
			}
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// short formats v with a k or M suffix and at most 6 significant digits.
func short(v float64) string {
	suffix := ""
	switch a := math.Abs(v); {
	case a >= 1e6:
		v, suffix = v/1e6, "M"
	case a >= 1e3:
		v, suffix = v/1e3, "k"
	}
	return round6(v) + suffix
}

// round6 formats v with at most 6 significant digits and no exponent.
func round6(v float64) string {
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(v, 'f', -1, 64)
}
