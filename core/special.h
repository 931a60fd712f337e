// Special functions on host doubles that more than one layer needs.
#pragma once

namespace nabla {

// I0, the modified Bessel function of the first kind of order 0, by its power series (converges for
// every argument; a Kaiser window's beta * sqrt(1 - r^2) and torchaudio's kaiser resampling kernel).
inline double bessel_i0(double x) {
  double sum = 1, term = 1;
  const double q = x * x / 4;
  for (int k = 1; k < 500; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < sum * 1e-17) break;
  }
  return sum;
}

}  // namespace nabla
