// Gathers and scatters along an indexed axis: one pass over the indices, never a dense indicator
// matrix. Gathers run in parallel over rows; scatters over the axes where no two updates can land
// on one element, each element's updates applied in row-major order (deterministic sums, and the
// last assignment wins).
#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../../core/error.hpp"
#include "../element.hpp"
#include "../view_checks.hpp"
#include "cpu_backend.hpp"
#include "first_failure.hpp"
#include "strided.hpp"

namespace vt::cpu {

namespace {

template <class T>
T* ptr(const View& v) {
  return static_cast<T*>(v.data);
}

// Calls fn with a value of the C++ type of an index dtype (the ops refuse other index types).
template <class Fn>
void visit_index_dtype(DType d, const char* kernel, Fn&& fn) {
  if (d == DType::i32) return fn(std::int32_t{});
  if (d == DType::i64) return fn(std::int64_t{});
  fail("cpu {}: indices are {}, not integers (internal error)", kernel, name_of(d));
}

// The element of the axis that index i addresses, or -1 when it is out of range.
template <class I>
std::int64_t resolve(I i, const IndexedAxis& axis) {
  const auto j = static_cast<std::int64_t>(i) + (i < 0 && axis.negative_from_end ? axis.length : 0);
  return j >= 0 && j < axis.length ? j : -1;
}

// The lowest offset of an out-of-range index any thread met: the one IndexFailure reports.
class FirstBad {
 public:
  void note(std::int64_t offset) {
    std::int64_t seen = first_.load(std::memory_order_relaxed);
    while (offset < seen && !first_.compare_exchange_weak(seen, offset, std::memory_order_relaxed)) {
    }
  }
  template <class I>
  void report(const I* indices, const IndexFailure& failure) const {
    const std::int64_t at = first_.load();
    if (at != none) failure.report(at, static_cast<std::int64_t>(indices[at]));
  }

 private:
  static constexpr std::int64_t none = std::numeric_limits<std::int64_t>::max();
  std::atomic<std::int64_t> first_{none};
};

template <class T>
void combine(ScatterKind kind, T& dst, T v) {
  switch (kind) {
    case ScatterKind::sum: dst = element::add(dst, v); return;  // integers wrap, as every integer sum
    case ScatterKind::max:
      if constexpr (std::is_floating_point_v<T>) {
        if (v > dst || std::isnan(v)) dst = v;  // a NaN wins, as in reduce
      } else if (v > dst) {
        dst = v;
      }
      return;
    case ScatterKind::assign: dst = v; return;
  }
}

Shape without(const Shape& s, std::size_t axis) {
  Shape r = s;
  r.erase(r.begin() + static_cast<std::ptrdiff_t>(axis));
  return r;
}

}  // namespace

void CpuBackend::gather(const View& in, const View& indices, IndexedAxis axis, const View& out,
                        const IndexFailure& failure) {
  if (recording()) return keep([=, this] { gather(in, indices, axis, out, failure); });
  check_same_rank(in, out, "cpu", "gather");
  check_same_rank(indices, out, "cpu", "gather");
  visit_any_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    visit_index_dtype(indices.dtype, "gather", [&](auto index_zero) {
      using I = decltype(index_zero);
      const T* x = ptr<T>(in);
      const I* ix = ptr<I>(indices);
      T* y = ptr<T>(out);
      FirstBad bad;
      for_each_row<3>(out.shape, {&in.strides, &indices.strides, &out.strides},
                      [&](auto off, std::int64_t len, auto inner) {
                        // Locals, not captures: the stores to y would otherwise reload them every element.
                        const I* const ir = ix + off[1];
                        const T* const xr = x + off[0];
                        T* const yr = y + off[2];
                        const std::int64_t is = inner[1], xs = inner[0], ys = inner[2], step = axis.stride;
                        const IndexedAxis ax = axis;
                        for (std::int64_t k = 0; k < len; ++k) {
                          const std::int64_t j = resolve(ir[k * is], ax);
                          if (j < 0) {
                            bad.note(off[1] + k * is);
                            yr[k * ys] = T(0);
                          } else {
                            yr[k * ys] = xr[k * xs + j * step];
                          }
                        }
                      });
      bad.report(ix, failure);
    });
  });
}

void CpuBackend::scatter(ScatterKind kind, const View& updates, const View& indices, IndexedAxis axis, const View& out,
                         const IndexFailure& failure) {
  if (recording()) return keep([=, this] { scatter(kind, updates, indices, axis, out, failure); });
  check_same_rank(indices, updates, "cpu", "scatter");
  check_same_rank(out, updates, "cpu", "scatter");
  visit_dtype(out.dtype, [&](auto zero) {
    using T = decltype(zero);
    visit_index_dtype(indices.dtype, "scatter", [&](auto index_zero) {
      using I = decltype(index_zero);
      const T* u = ptr<T>(updates);
      const I* ix = ptr<I>(indices);
      T* y = ptr<T>(out);
      FirstBad bad;
      // Serially, in row-major order: that order decides sums' rounding and which assignment wins.
      // Consecutive updates of one element (sorted segment ids) combine in a register, stored when the
      // element changes: the same operations in the same order, without a store and reload per update.
      auto run_kind = [&](auto kind_constant, const Shape& shape, const Shape& su, const Shape& si, const Shape& so,
                          std::int64_t base_u, std::int64_t base_i, std::int64_t base_o) {
        constexpr ScatterKind kind_ = decltype(kind_constant)::value;
        for_each_row<3>(
            shape, {&su, &si, &so},
            [&](auto off, std::int64_t len, auto inner) {
              // Locals, not captures: the stores to y would otherwise reload them every update.
              const I* const ir = ix + base_i + off[1];
              const T* const ur = u + base_u + off[0];
              T* const yr = y + base_o + off[2];
              const std::int64_t is = inner[1], us = inner[0], ys = inner[2], step = axis.stride;
              const IndexedAxis ax = axis;
              bool holding = false;
              std::int64_t open = 0;  // the element of yr held in `held`, while holding
              T held{};
              for (std::int64_t k = 0; k < len; ++k) {
                const std::int64_t j = resolve(ir[k * is], ax);
                if (j < 0) {
                  bad.note(base_i + off[1] + k * is);
                  continue;
                }
                const std::int64_t dst = k * ys + j * step;
                if (!holding || dst != open) {
                  if (holding) yr[open] = held;
                  holding = true;
                  open = dst;
                  held = yr[dst];
                }
                combine(kind_, held, ur[k * us]);
              }
              if (holding) yr[open] = held;
            },
            /*parallel=*/false);
      };
      auto run = [&](const Shape& shape, const Shape& su, const Shape& si, const Shape& so, std::int64_t base_u,
                     std::int64_t base_i, std::int64_t base_o) {
        switch (kind) {
          case ScatterKind::sum:
            return run_kind(std::integral_constant<ScatterKind, ScatterKind::sum>{}, shape, su, si, so, base_u, base_i,
                            base_o);
          case ScatterKind::max:
            return run_kind(std::integral_constant<ScatterKind, ScatterKind::max>{}, shape, su, si, so, base_u, base_i,
                            base_o);
          case ScatterKind::assign:
            return run_kind(std::integral_constant<ScatterKind, ScatterKind::assign>{}, shape, su, si, so, base_u,
                            base_i, base_o);
        }
      };
      // Updates at different coordinates of an axis along which out moves (stride not 0: the batch,
      // or the axes before and after the indexed one) never land on one element, so such an axis
      // is split across threads; each element still sees its updates in row-major order.
      const Shape& shape = updates.shape;
      std::size_t split = 0;
      while (split < shape.size() && (out.strides[split] == 0 || shape[split] < 2)) ++split;
      if (split == shape.size() || numel(shape) < 2 * parallel_grain || omp_in_parallel()) {
        run(shape, updates.strides, indices.strides, out.strides, 0, 0, 0);
      } else {
        const Shape rest = without(shape, split), su = without(updates.strides, split),
                    si = without(indices.strides, split), so = without(out.strides, split);
        FirstFailure error;  // the rows' walk allocates
#pragma omp parallel for schedule(static)
        for (std::int64_t c = 0; c < shape[split]; ++c)
          error.run(c, [&] {
            run(rest, su, si, so, c * updates.strides[split], c * indices.strides[split], c * out.strides[split]);
          });
        error.rethrow();
      }
      bad.report(ix, failure);
    });
  });
}

}  // namespace vt::cpu
