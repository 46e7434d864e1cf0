// Inline SVG for the run report: line charts and a horizontal stacked bar, drawn as text
// with no script, font or file from anywhere else. Every value drawn is also in the
// element's data-* attributes, so a test can read back what a picture shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainerd::daemon {

// Text safe inside HTML and SVG elements and attribute values.
std::string EscapeHtml(const std::string& text);

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite y values are gaps
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  // Formats an axis tick of y (bytes, loss, samples/s).
  std::string (*format_y)(double) = nullptr;
  std::vector<ChartSeries> series;
};

// An SVG line chart, 640 x 240, one polyline per series with a legend; "no data" when no
// series has a finite point.
std::string RenderLineChart(const LineChart& chart);

struct BarSegment {
  std::string name;  // e.g. "activations"; the CSS class "seg-<name>" colours it
  std::int64_t bytes = 0;
  bool hatched = false;  // drawn striped: a reserve, or bytes a plan does not keep
};

// A horizontal bar 640 wide whose segments are drawn left to right in proportion to their
// bytes out of `scale_bytes` (at least their sum), followed by a legend of names and sizes
// unless `legend` is false. Each segment is a <rect class="segment" data-name=...
// data-bytes=...>.
std::string RenderStackedBar(const std::vector<BarSegment>& segments, std::int64_t scale_bytes,
                             bool legend = true);

struct RooflineDot {
  std::string name;
  double intensity = 0;       // FLOP per byte
  double achieved_flops = 0;  // FLOP/s
};

// A roofline on log-log axes, 640 x 300: the roof min(P, I x B) from the measured peak
// `peak_flops` and bandwidth `bytes_per_second`, and one dot per entry of `dots` with a
// positive intensity and rate (<circle class="dot" data-name=...>).
std::string RenderRoofline(double peak_flops, double bytes_per_second,
                           const std::vector<RooflineDot>& dots);

}  // namespace trainerd::daemon
