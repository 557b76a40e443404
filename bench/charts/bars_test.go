package charts

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestReadBars(t *testing.T) {
	in := "# from somewhere\nserver, RSS B\nstd net,7912\n\"a, b\",0.5\n"
	unit, bars, err := ReadBars(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Bar{{"std net", 7912}, {"a, b", 0.5}}
	if unit != "RSS B" || len(bars) != len(want) || bars[0] != want[0] || bars[1] != want[1] {
		t.Errorf("got %q %v, want %q %v", unit, bars, "RSS B", want)
	}
}

func TestReadBarsErrors(t *testing.T) {
	for _, in := range []string{
		"",                   // nothing
		"server,unit\n",      // no bars
		"server,unit\nx\n",   // one column
		"server,unit\nx,y\n", // not a number
		"server,unit\nx,-1\n",
		"server,unit\nx,NaN\n",
		"server,unit\nx,1,2\n",
	} {
		if _, _, err := ReadBars(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

func TestRenderBars(t *testing.T) {
	svg, err := RenderBars("A title", "req/s", []Bar{{"first", 1.25}, {"second", 80507}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(svg)
	for _, want := range []string{"<svg", ">A title<", ">req/s<", ">first<", ">second<", ">1.25<", ">80507<"} {
		if !strings.Contains(s, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	// The first bar is drawn on top. gonum's SVG prints a text's y negated
	// (y grows upwards in its coordinates), so the higher label has the
	// smaller y attribute.
	if yf, ys := labelY(t, s, "first"), labelY(t, s, "second"); yf >= ys {
		t.Errorf("first label at y=%v, second at y=%v: first is not above", yf, ys)
	}
	if _, err := RenderBars("t", "u", nil); err == nil {
		t.Error("no bars: no error")
	}
}

// labelY returns the y attribute of the SVG text element whose text is
// label.
func labelY(t *testing.T, svg, label string) float64 {
	t.Helper()
	m := regexp.MustCompile(`<text x="[^"]*" y="([^"]*)"[^>]*>` + regexp.QuoteMeta(label) + `<`).FindStringSubmatch(svg)
	if m == nil {
		t.Fatalf("no text %q", label)
	}
	y, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return y
}
