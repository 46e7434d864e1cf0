#include "profile/roofline.h"

#include <algorithm>

namespace trainerd {

double Roof::RidgeIntensity() const {
  return bandwidth_bytes_per_second > 0 ? peak_flops / bandwidth_bytes_per_second : 0;
}

RooflinePoint PlaceOnRoofline(const Roof& roof, double flops, double bytes, double seconds) {
  RooflinePoint p;
  p.flops = flops;
  p.bytes = bytes;
  p.seconds = seconds;
  if (seconds <= 0 || bytes <= 0) return p;
  p.achieved_bytes_per_second = bytes / seconds;
  if (flops > 0) {
    p.intensity = flops / bytes;
    p.achieved_flops = flops / seconds;
    p.attainable_flops = std::min(roof.peak_flops, p.intensity * roof.bandwidth_bytes_per_second);
    p.fraction_of_bound = p.attainable_flops > 0 ? p.achieved_flops / p.attainable_flops : 0;
    p.bound = p.intensity >= roof.RidgeIntensity() ? "compute" : "memory";
  } else if (roof.bandwidth_bytes_per_second > 0) {
    p.fraction_of_bound = p.achieved_bytes_per_second / roof.bandwidth_bytes_per_second;
    p.bound = "memory";
  }
  return p;
}

}  // namespace trainerd
