#pragma once
// The eigendecomposition of a symmetric tridiagonal matrix by implicit QL and QR sweeps with
// Wilkinson's shift: LAPACK's dsteqr method (its recurrences, deflation test, block scaling and
// choice of QL or QR), which CpuBackend::eigh runs after Eigen's Householder tridiagonalisation.
// Eigen's own sweep (tridiagonal_qr_step) takes as many rotations, but applies each one to its
// 2 x 2 block's entries term by term, where dsteqr's recurrences carry the diagonal's change p from
// rotation to rotation: with Eigen's driver and deflation kept and only the sweep replaced, the
// residual and the eigenvalue error fall to LAPACK's (docs/performance.md, "eigh").
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

namespace vt::cpu {

namespace tridiagonal_detail {

// c, s and r with c f + s g = r and c g - s f = 0, c >= 0 (LAPACK's dlartg).
template <class T>
inline void givens(T f, T g, T& c, T& s, T& r) {
  if (g == T(0)) {
    c = 1, s = 0, r = f;
    return;
  }
  if (f == T(0)) {
    c = 0, s = std::copysign(T(1), g), r = std::abs(g);
    return;
  }
  const T f2 = f * f, g2 = g * g, h2 = f2 + g2;
  // std::hypot only where a square would lose bits or overflow: it is several times slower.
  const T min = std::numeric_limits<T>::min(), max = std::numeric_limits<T>::max();
  const T d = f2 >= min && g2 >= min && h2 <= max ? std::sqrt(h2) : std::hypot(f, g);
  c = std::abs(f) / d;
  r = std::copysign(d, f);
  s = g / r;
}

// The eigenvalues of [[a, b], [b, c]], rt1 the larger in magnitude, and rt1's eigenvector
// (c1, s1) (LAPACK's dlaev2: rt2 from the determinant, the vector from the better-conditioned form).
template <class T>
inline void symmetric_2x2(T a, T b, T c, T& rt1, T& rt2, T& c1, T& s1) {
  const T sm = a + c, df = a - c, adf = std::abs(df), tb = b + b, ab = std::abs(tb);
  const bool a_larger = std::abs(a) > std::abs(c);
  const T acmx = a_larger ? a : c, acmn = a_larger ? c : a;
  T rt;
  if (adf > ab) rt = adf * std::sqrt(T(1) + (ab / adf) * (ab / adf));
  else if (adf < ab) rt = ab * std::sqrt(T(1) + (adf / ab) * (adf / ab));
  else rt = ab * std::sqrt(T(2));
  int sgn1 = 1;
  if (sm < 0) {
    rt1 = T(0.5) * (sm - rt), sgn1 = -1;
    rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
  } else if (sm > 0) {
    rt1 = T(0.5) * (sm + rt);
    rt2 = (acmx / rt1) * acmn - (b / rt1) * b;
  } else {
    rt1 = T(0.5) * rt, rt2 = T(-0.5) * rt;
  }
  const int sgn2 = df >= 0 ? 1 : -1;
  const T cs = df >= 0 ? df + rt : df - rt;
  if (std::abs(cs) > ab) {
    const T ct = -tb / cs;
    s1 = T(1) / std::sqrt(T(1) + ct * ct), c1 = ct * s1;
  } else if (ab == 0) {
    c1 = 1, s1 = 0;
  } else {
    const T tn = -cs / tb;
    c1 = T(1) / std::sqrt(T(1) + tn * tn), s1 = tn * c1;
  }
  if (sgn1 == sgn2) {
    const T tn = c1;
    c1 = -s1, s1 = tn;
  }
}

// Columns j and j + 1 of Z times the rotation: zj <- c zj + s zj1, zj1 <- c zj1 - s zj.
template <class T>
inline void rotate_columns(T* zj, T* zj1, std::int64_t rows, T c, T s) {
  for (std::int64_t i = 0; i < rows; ++i) {
    const T x = zj[i], y = zj1[i];
    zj[i] = c * x + s * y;
    zj1[i] = c * y - s * x;
  }
}

// x * 2^k, exactly unless it over- or underflows (two steps: 2^k alone may not be representable).
template <class T>
inline T times_power_of_two(T x, int k) {
  return x * std::ldexp(T(1), k / 2) * std::ldexp(T(1), k - k / 2);
}

}  // namespace tridiagonal_detail

// d[0..n) the diagonal, e[0..n-1) the off-diagonal (both overwritten); z holds n columns of `rows`
// entries each (column-major) and is multiplied on the right by every rotation, so a Z that holds
// the tridiagonalisation's Q comes back holding the eigenvectors. On return d holds the eigenvalues
// in ascending order, z's columns in the same order. Returns false when some eigenvalue has not
// converged after 30 n sweeps (as dsteqr; d and z then hold no decomposition).
template <class T>
bool tridiagonal_eigen(std::int64_t n, T* d, T* e, T* z, std::int64_t rows) {
  using namespace tridiagonal_detail;
  using std::abs;
  if (n <= 1) return true;
  const T eps = std::numeric_limits<T>::epsilon() / 2, eps2 = eps * eps;
  const T safmin = std::numeric_limits<T>::min();
  // Each unreduced block is scaled (by a power of two) into [ssfmin, ssfmax] when its largest entry
  // is outside, so that squares in the deflation test neither overflow nor underflow.
  const T ssfmax = std::sqrt(T(1) / safmin) / 3, ssfmin = std::sqrt(safmin) / eps2;
  const std::int64_t most_sweeps = 30 * n;
  std::int64_t sweeps = 0;
  auto column = [&](std::int64_t j) { return z + j * rows; };
  // e[m] is negligible against d[m] and d[m + 1] (a relative test: small eigenvalues keep their digits).
  auto negligible = [&](std::int64_t m) { return e[m] * e[m] <= (eps2 * abs(d[m])) * abs(d[m + 1]) + safmin; };

  for (std::int64_t first = 0; first < n;) {
    if (first > 0) e[first - 1] = 0;
    // The unreduced block [first, last].
    std::int64_t last = first;
    for (; last < n - 1; ++last) {
      const T t = abs(e[last]);
      if (t == T(0)) break;
      if (t <= std::sqrt(abs(d[last])) * std::sqrt(abs(d[last + 1])) * eps) {
        e[last] = 0;
        break;
      }
    }
    const std::int64_t block_first = first, block_last = last;
    first = last + 1;
    if (block_last == block_first) continue;
    T largest = 0;
    for (std::int64_t i = block_first; i <= block_last; ++i) largest = std::max(largest, abs(d[i]));
    for (std::int64_t i = block_first; i < block_last; ++i) largest = std::max(largest, abs(e[i]));
    if (largest == T(0)) continue;
    int exponent = 0;  // the block is scaled by 2^exponent
    if (largest > ssfmax || largest < ssfmin) {
      std::frexp(largest, &exponent);
      exponent = -exponent;
      for (std::int64_t i = block_first; i <= block_last; ++i) d[i] = times_power_of_two(d[i], exponent);
      for (std::int64_t i = block_first; i < block_last; ++i) e[i] = times_power_of_two(e[i], exponent);
    }
    // QL when the block's bottom end is the larger in magnitude (deflating from the top), else QR.
    std::int64_t l = block_first, lend = block_last;
    if (abs(d[lend]) < abs(d[l])) std::swap(l, lend);
    if (lend > l) {
      while (l <= lend) {  // QL: eigenvalues converge at l, which moves down
        std::int64_t m = l;
        while (m < lend && !negligible(m)) ++m;
        if (m < lend) e[m] = 0;
        if (m == l) {
          ++l;
          continue;
        }
        if (m == l + 1) {
          T rt1, rt2, c, s;
          symmetric_2x2(d[l], e[l], d[l + 1], rt1, rt2, c, s);
          rotate_columns(column(l), column(l + 1), rows, c, s);
          d[l] = rt1, d[l + 1] = rt2, e[l] = 0;
          l += 2;
          continue;
        }
        if (sweeps == most_sweeps) break;
        ++sweeps;
        // Wilkinson's shift from the 2 x 2 block at l, then one sweep from m up to l.
        T p = d[l];
        T g = (d[l + 1] - p) / (2 * e[l]);
        T r = std::hypot(g, T(1));
        g = d[m] - p + e[l] / (g + std::copysign(r, g));
        T s = 1, c = 1;
        p = 0;
        for (std::int64_t i = m - 1; i >= l; --i) {
          const T f = s * e[i], b = c * e[i];
          givens(g, f, c, s, r);
          if (i != m - 1) e[i + 1] = r;
          g = d[i + 1] - p;
          r = (d[i] - g) * s + 2 * c * b;
          p = s * r;
          d[i + 1] = g + p;
          g = c * r - b;
          rotate_columns(column(i), column(i + 1), rows, c, -s);
        }
        d[l] -= p;
        e[l] = g;
      }
    } else {
      while (l >= lend) {  // QR: eigenvalues converge at l, which moves up
        std::int64_t m = l;
        while (m > lend && !negligible(m - 1)) --m;
        if (m > lend) e[m - 1] = 0;
        if (m == l) {
          --l;
          continue;
        }
        if (m == l - 1) {
          T rt1, rt2, c, s;
          symmetric_2x2(d[l - 1], e[l - 1], d[l], rt1, rt2, c, s);
          rotate_columns(column(l - 1), column(l), rows, c, s);
          d[l - 1] = rt1, d[l] = rt2, e[l - 1] = 0;
          l -= 2;
          continue;
        }
        if (sweeps == most_sweeps) break;
        ++sweeps;
        T p = d[l];
        T g = (d[l - 1] - p) / (2 * e[l - 1]);
        T r = std::hypot(g, T(1));
        g = d[m] - p + e[l - 1] / (g + std::copysign(r, g));
        T s = 1, c = 1;
        p = 0;
        for (std::int64_t i = m; i < l; ++i) {
          const T f = s * e[i], b = c * e[i];
          givens(g, f, c, s, r);
          if (i != m) e[i - 1] = r;
          g = d[i] - p;
          r = (d[i + 1] - g) * s + 2 * c * b;
          p = s * r;
          d[i] = g + p;
          g = c * r - b;
          rotate_columns(column(i), column(i + 1), rows, c, s);
        }
        d[l] -= p;
        e[l - 1] = g;
      }
    }
    if (exponent != 0) {
      for (std::int64_t i = block_first; i <= block_last; ++i) d[i] = times_power_of_two(d[i], -exponent);
      for (std::int64_t i = block_first; i < block_last; ++i) e[i] = times_power_of_two(e[i], -exponent);
    }
    if (sweeps == most_sweeps) {
      for (std::int64_t i = 0; i < n - 1; ++i)
        if (e[i] != T(0)) return false;
    }
  }
  // Ascending, by selection (at most n - 1 column swaps).
  for (std::int64_t i = 0; i < n - 1; ++i) {
    std::int64_t k = i;
    for (std::int64_t j = i + 1; j < n; ++j)
      if (d[j] < d[k]) k = j;
    if (k != i) {
      std::swap(d[i], d[k]);
      std::swap_ranges(column(i), column(i) + rows, column(k));
    }
  }
  return true;
}

}  // namespace vt::cpu
