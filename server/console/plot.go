package console

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"
)

// palette is the plots' line colours (colour-blind-safe Okabe–Ito).
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"}

// plot draws series as an inline SVG line chart over the last window ending now, with
// a y axis from 0 to the largest value and a legend; labels name the series in order.
func (c *Console) plot(series []Series, unit string, labels []string) template.HTML {
	const w, h, left, right, top, bottom = 720.0, 220.0, 60.0, 10.0, 10.0, 40.0
	now := c.clock.Now().UnixMilli()
	from := now - c.opts.Window.Milliseconds()
	ymax := 0.0
	for _, s := range series {
		for _, p := range s.Points {
			ymax = math.Max(ymax, p.V)
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	ymax = niceCeil(ymax)
	x := func(t int64) float64 { return left + (w-left-right)*float64(t-from)/float64(now-from) }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/ymax) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="plot" viewBox="0 0 %g %g" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`, w, h, html.EscapeString(unit))
	// grid and axes
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		fmt.Fprintf(&b, `<line class="grid" x1="%g" y1="%.1f" x2="%g" y2="%.1f"/>`, left, y(v), w-right, y(v))
		fmt.Fprintf(&b, `<text class="tick" x="%g" y="%.1f" text-anchor="end">%s</text>`, left-4, y(v)+4, html.EscapeString(shortNum(v)))
	}
	layout := "15:04"
	if now-from < 20*60*1000 {
		layout = "15:04:05" // a short window's ticks would repeat the same minute
	}
	for i := 0; i <= 6; i++ {
		t := from + (now-from)*int64(i)/6
		anchor := "middle"
		if i == 6 {
			anchor = "end" // inside the frame
		}
		fmt.Fprintf(&b, `<text class="tick" x="%.1f" y="%g" text-anchor="%s">%s</text>`, x(t), h-bottom+14, anchor, time.UnixMilli(t).UTC().Format(layout))
	}
	fmt.Fprintf(&b, `<text class="unit" x="%g" y="%g">%s (UTC)</text>`, left, h-6, html.EscapeString(unit))
	points := 0
	for i, s := range series {
		colour := palette[i%len(palette)]
		var pts []string
		for _, p := range s.Points {
			if p.T < from {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.T), y(p.V)))
		}
		points += len(pts)
		label := s.Name
		if i < len(labels) {
			label = labels[i]
		}
		if len(pts) == 1 {
			pts = append(pts, pts[0]) // a single sample still shows, as a dot
		}
		if len(pts) > 0 {
			// data-last and data-max carry the values themselves, for scripts and tests
			// that read the plot.
			last, most := s.Points[len(s.Points)-1].V, 0.0
			for _, p := range s.Points {
				most = math.Max(most, p.V)
			}
			// The first line (a total, where there is one) is drawn wider, so that a part
			// equal to it does not hide it.
			width := "1.5"
			if i == 0 && len(series) > 1 && label == "total" {
				width = "3"
			}
			fmt.Fprintf(&b, `<polyline class="line" data-series="%s" data-last="%g" data-max="%g" fill="none" stroke="%s" stroke-width="%s" stroke-opacity="0.85" points="%s"/>`,
				html.EscapeString(label), last, most, colour, width, strings.Join(pts, " "))
		}
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="10" height="3" fill="%s"/><text class="legend" x="%g" y="%g">%s</text>`,
			w-right-200, top+8+float64(i)*13, colour, w-right-186, top+12+float64(i)*13, html.EscapeString(label))
	}
	if points == 0 {
		fmt.Fprintf(&b, `<text class="empty" x="%g" y="%g" text-anchor="middle">no samples yet (one every %s)</text>`,
			(left+w-right)/2, (top+h-bottom)/2, c.opts.SampleInterval)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every piece of text above is escaped
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func shortNum(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.3gG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	}
	return fmt.Sprintf("%.3g", v)
}
