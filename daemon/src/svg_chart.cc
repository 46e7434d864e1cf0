#include "trainerd/daemon/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "trainerd/trainer/spec/units.h"

namespace trainerd::daemon {

namespace {

constexpr double kWidth = 640, kHeight = 240;
constexpr double kLeft = 70, kRight = 10, kTop = 24, kBottom = 36;  // plot margins
constexpr const char* kPalette[] = {"#4269d0", "#efb118", "#ff725c", "#6cc5b0",
                                    "#3ca951", "#ff8ab7", "#a463f2", "#97bbf5"};

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

std::string PlainNumber(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", v);
  return buffer;
}

}  // namespace

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderLineChart(const LineChart& chart) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const ChartSeries& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  }
  std::string svg = "<figure class=\"chart\"><figcaption>" + EscapeHtml(chart.title) +
                    "</figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
                    Num(kWidth) + "\" height=\"" + Num(kHeight) + "\" viewBox=\"0 0 " +
                    Num(kWidth) + " " + Num(kHeight) + "\" role=\"img\" aria-label=\"" +
                    EscapeHtml(chart.title) + "\">\n";
  if (!std::isfinite(x0)) {
    return svg + "<text x=\"" + Num(kWidth / 2) + "\" y=\"" + Num(kHeight / 2) +
           "\" text-anchor=\"middle\" class=\"muted\">no data</text></svg></figure>\n";
  }
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) {  // a flat line: centred in a band of 10 % of its value (or of 1 at 0)
    const double half = y0 == 0 ? 1 : std::abs(y0) * 0.1;
    y0 -= half;
    y1 += half;
  }
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };
  auto format_y = chart.format_y != nullptr ? chart.format_y : PlainNumber;
  // Axes, with 4 ticks on y and the x range at its ends.
  svg += "<g class=\"axes\"><line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(kTop + ph) + "\" x2=\"" +
         Num(kLeft + pw) + "\" y2=\"" + Num(kTop + ph) + "\"/><line x1=\"" + Num(kLeft) +
         "\" y1=\"" + Num(kTop) + "\" x2=\"" + Num(kLeft) + "\" y2=\"" + Num(kTop + ph) + "\"/>";
  for (int i = 0; i <= 4; ++i) {
    const double y = y0 + (y1 - y0) * i / 4;
    svg += "<line class=\"grid\" x1=\"" + Num(kLeft) + "\" y1=\"" + Num(py(y)) + "\" x2=\"" +
           Num(kLeft + pw) + "\" y2=\"" + Num(py(y)) + "\"/><text x=\"" + Num(kLeft - 4) +
           "\" y=\"" + Num(py(y) + 4) + "\" text-anchor=\"end\">" + EscapeHtml(format_y(y)) +
           "</text>";
  }
  svg += "<text x=\"" + Num(kLeft) + "\" y=\"" + Num(kHeight - 20) + "\">" + PlainNumber(x0) +
         "</text><text x=\"" + Num(kLeft + pw) + "\" y=\"" + Num(kHeight - 20) +
         "\" text-anchor=\"end\">" + PlainNumber(x1) + "</text><text x=\"" + Num(kLeft + pw / 2) +
         "\" y=\"" + Num(kHeight - 6) + "\" text-anchor=\"middle\">" + EscapeHtml(chart.x_label) +
         "</text><text x=\"4\" y=\"14\">" + EscapeHtml(chart.y_label) + "</text></g>\n";
  for (std::size_t i = 0; i < chart.series.size(); ++i) {
    const ChartSeries& s = chart.series[i];
    const char* colour = kPalette[i % std::size(kPalette)];
    std::string path;
    bool pen_down = false;
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) {
        pen_down = false;
        continue;
      }
      path += (pen_down ? " L" : " M") + Num(px(x)) + " " + Num(py(y));
      pen_down = true;
    }
    svg += "<path class=\"series\" data-name=\"" + EscapeHtml(s.name) + "\" data-points=\"" +
           std::to_string(s.points.size()) + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.5\" d=\"" + path + "\"/>\n";
    if (chart.series.size() > 1) {
      const double ly = kTop + 12.0 * static_cast<double>(i);
      svg += "<text x=\"" + Num(kLeft + pw - 4) + "\" y=\"" + Num(ly + 4) +
             "\" text-anchor=\"end\" fill=\"" + colour + "\">" + EscapeHtml(s.name) + "</text>\n";
    }
  }
  return svg + "</svg></figure>\n";
}

std::string RenderStackedBar(const std::vector<BarSegment>& segments, std::int64_t scale_bytes,
                             bool legend) {
  std::int64_t total = 0;
  for (const BarSegment& s : segments) total += std::max<std::int64_t>(s.bytes, 0);
  const double scale = static_cast<double>(std::max<std::int64_t>({scale_bytes, total, 1}));
  constexpr double kBarHeight = 28;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"bar\" width=\"" +
                    Num(kWidth) + "\" height=\"" + Num(kBarHeight + 2) + "\" viewBox=\"0 0 " +
                    Num(kWidth) + " " + Num(kBarHeight + 2) + "\">\n";
  std::string names = "<ul class=\"legend\">";
  double x = 0;
  for (const BarSegment& s : segments) {
    const double w = static_cast<double>(std::max<std::int64_t>(s.bytes, 0)) / scale * kWidth;
    svg += "<rect class=\"segment seg-" + EscapeHtml(s.name) + (s.hatched ? " hatched" : "") +
           "\" data-name=\"" + EscapeHtml(s.name) + "\" data-bytes=\"" + std::to_string(s.bytes) +
           "\" x=\"" + Num(x) + "\" y=\"1\" width=\"" + Num(w) + "\" height=\"" + Num(kBarHeight) +
           "\"><title>" + EscapeHtml(s.name + " " + FormatBytes(s.bytes)) + "</title></rect>\n";
    x += w;
    names += "<li><span class=\"swatch seg-" + EscapeHtml(s.name) + (s.hatched ? " hatched" : "") +
             "\"></span>" + EscapeHtml(s.name) + " " + EscapeHtml(FormatBytes(s.bytes)) + "</li>";
  }
  svg += "<rect class=\"frame\" x=\"0.5\" y=\"0.5\" width=\"" + Num(kWidth - 1) + "\" height=\"" +
         Num(kBarHeight + 1) + "\" fill=\"none\"/></svg>\n";
  return legend ? svg + names + "</ul>\n" : svg;
}

std::string RenderRoofline(double peak_flops, double bytes_per_second,
                           const std::vector<RooflineDot>& dots) {
  constexpr double kH = 300;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"roofline\" width=\"" +
                    Num(kWidth) + "\" height=\"" + Num(kH) + "\" viewBox=\"0 0 " + Num(kWidth) +
                    " " + Num(kH) + "\" role=\"img\" aria-label=\"roofline\">\n";
  if (!(peak_flops > 0) || !(bytes_per_second > 0)) {
    return svg +
           "<text x=\"320\" y=\"150\" text-anchor=\"middle\" class=\"muted\">no roofs "
           "measured</text></svg>\n";
  }
  // Decades of intensity around the ridge and the dots; rates from 1/1000 of the peak up.
  const double ridge = peak_flops / bytes_per_second;
  double lo = std::min(ridge / 100, 0.01), hi = std::max(ridge * 100, 100.0);
  double bottom = peak_flops / 1000;
  for (const RooflineDot& d : dots) {
    if (d.intensity > 0) lo = std::min(lo, d.intensity / 2), hi = std::max(hi, d.intensity * 2);
    if (d.achieved_flops > 0) bottom = std::min(bottom, d.achieved_flops / 2);
  }
  const double top = peak_flops * 2;
  const double pw = kWidth - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + std::log10(x / lo) / std::log10(hi / lo) * pw; };
  auto py = [&](double y) {
    return kTop + (1 - std::log10(y / bottom) / std::log10(top / bottom)) * ph;
  };
  svg += "<g class=\"axes\"><line x1=\"" + Num(kLeft) + "\" y1=\"" + Num(kTop + ph) + "\" x2=\"" +
         Num(kLeft + pw) + "\" y2=\"" + Num(kTop + ph) + "\"/><line x1=\"" + Num(kLeft) +
         "\" y1=\"" + Num(kTop) + "\" x2=\"" + Num(kLeft) + "\" y2=\"" + Num(kTop + ph) + "\"/>";
  for (double x = std::pow(10, std::ceil(std::log10(lo))); x <= hi; x *= 10) {
    svg += "<text x=\"" + Num(px(x)) + "\" y=\"" + Num(kH - 20) + "\" text-anchor=\"middle\">" +
           PlainNumber(x) + "</text>";
  }
  for (double y = std::pow(10, std::ceil(std::log10(bottom))); y <= top; y *= 10) {
    svg += "<line class=\"grid\" x1=\"" + Num(kLeft) + "\" y1=\"" + Num(py(y)) + "\" x2=\"" +
           Num(kLeft + pw) + "\" y2=\"" + Num(py(y)) + "\"/><text x=\"" + Num(kLeft - 4) +
           "\" y=\"" + Num(py(y) + 4) + "\" text-anchor=\"end\">" + PlainNumber(y) + "</text>";
  }
  svg += "<text x=\"" + Num(kLeft + pw / 2) + "\" y=\"" + Num(kH - 6) +
         "\" text-anchor=\"middle\">arithmetic intensity (FLOP/byte)</text><text x=\"4\" "
         "y=\"14\">FLOP/s</text></g>\n";
  const double x0 = std::max(lo, bottom / bytes_per_second);  // where the slope enters the plot
  svg += "<path class=\"roof\" fill=\"none\" stroke=\"#1d1d1f\" stroke-width=\"2\" d=\"M" +
         Num(px(x0)) + " " + Num(py(x0 * bytes_per_second)) + " L" + Num(px(ridge)) + " " +
         Num(py(peak_flops)) + " L" + Num(px(hi)) + " " + Num(py(peak_flops)) + "\"/>\n";
  for (std::size_t i = 0; i < dots.size(); ++i) {
    const RooflineDot& d = dots[i];
    if (!(d.intensity > 0) || !(d.achieved_flops > 0)) continue;
    const char* colour = kPalette[i % std::size(kPalette)];
    svg += "<circle class=\"dot\" data-name=\"" + EscapeHtml(d.name) + "\" cx=\"" +
           Num(px(d.intensity)) + "\" cy=\"" + Num(py(d.achieved_flops)) + "\" r=\"5\" fill=\"" +
           colour + "\"/><text x=\"" + Num(px(d.intensity) + 8) + "\" y=\"" +
           Num(py(d.achieved_flops) + 4) + "\" fill=\"" + colour + "\">" + EscapeHtml(d.name) +
           "</text>\n";
  }
  return svg + "</svg>\n";
}

}  // namespace trainerd::daemon
