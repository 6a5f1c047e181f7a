// The CPU backend's recordings. A jit plan of a few kilobytes spends most of its time around its kernels, not in
// them: each op's views, shape checks and dispatch cost more than the arithmetic on its few elements. A recording
// keeps each kernel call once, views and all, and a replay makes the calls again (a loop's body runs as a plan at
// every step). Elementwise calls on small views are kept compiled, as each operand's element offsets, and replay as
// one loop over them; the others call the kernel again with the views they were given.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "../../core/error.hpp"
#include "../element.hpp"
#include "cpu_backend.hpp"

namespace vt::cpu {

namespace {

// Plans up to this size (arena, arguments and results at the call's batch size) are recorded: they fit a core's L1
// and L2 together, so running them by chunks of examples would gain nothing. A loop's body is recorded whatever its
// size: it runs over the same buffers at every step, each step paying again for the views and dispatch that a replay
// skips, and the loop op itself runs by the outer plan's chunks.
constexpr std::int64_t recorded_bytes = std::int64_t{64} << 10;
// Elementwise calls of up to this many elements are kept compiled; larger ones call the kernel.
constexpr std::int64_t compiled_elements = 4096;

struct CpuRecording final : Recording {
  std::vector<std::function<void()>> calls;
  std::unordered_set<void*> memory;  // allocated while recording: the calls may read and write it
  ~CpuRecording() override {
    for (void* p : memory) std::free(p);
  }
  void replay() override;
};

thread_local CpuRecording* now = nullptr;  // the calling thread's recording, while it records

void CpuRecording::replay() {
  // The calls run, also where a thread replays while it records (it never does: a plan that runs plans is not
  // recorded).
  CpuRecording* const outer = now;
  now = nullptr;
  try {
    for (const auto& call : calls) call();
  } catch (...) {
    now = outer;
    throw;
  }
  now = outer;
}

// The element offsets of a view walked in row-major order over the output's `shape` by its strides (as the kernels
// walk it: a broadcast axis has stride 0), or empty when there are none or more than compiled_elements.
std::vector<std::int64_t> offsets(const View& v, const Shape& shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) n *= d;
  if (n == 0 || n > compiled_elements || v.strides.size() != shape.size()) return {};
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(n));
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) offset += index[d] * v.strides[d];
    out.push_back(offset);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Offsets as 32-bit integers, element by element of the output: a, b (when binary) and out, interleaved.
struct Compiled {
  std::vector<std::int32_t> at;  // per element: one offset per operand
  std::size_t operands = 0;
};

bool compile(const std::vector<const View*>& views, const Shape& shape, Compiled& c) {
  std::vector<std::vector<std::int64_t>> each;
  for (const View* v : views) {
    each.push_back(offsets(*v, shape));
    if (each.back().empty()) return false;
  }
  c.operands = views.size();
  const std::size_t n = each[0].size();
  c.at.resize(n * c.operands);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < c.operands; ++k) {
      const std::int64_t o = each[k][i];
      if (o < INT32_MIN || o > INT32_MAX) return false;
      c.at[i * c.operands + k] = static_cast<std::int32_t>(o);
    }
  return true;
}

template <class T, class Fn>
std::function<void()> compiled_binary(const View& a, const View& b, const View& out, Compiled c, Fn fn) {
  return [x = static_cast<const T*>(a.data), y = static_cast<const T*>(b.data), z = static_cast<T*>(out.data),
          c = std::move(c), fn] {
    const std::int32_t* at = c.at.data();
    const std::size_t n = c.at.size();
    for (std::size_t i = 0; i < n; i += 3) z[at[i + 2]] = fn(x[at[i]], y[at[i + 1]]);
  };
}

template <class T>
std::function<void()> compiled_binary(BinaryKind kind, const View& a, const View& b, const View& out, Compiled c) {
  switch (kind) {
    case BinaryKind::add: return compiled_binary<T>(a, b, out, std::move(c), [](T u, T v) { return u + v; });
    case BinaryKind::sub: return compiled_binary<T>(a, b, out, std::move(c), [](T u, T v) { return u - v; });
    case BinaryKind::mul: return compiled_binary<T>(a, b, out, std::move(c), [](T u, T v) { return u * v; });
    case BinaryKind::div: return compiled_binary<T>(a, b, out, std::move(c), [](T u, T v) { return u / v; });
    default: return nullptr;
  }
}

template <class Bits>
std::function<void()> compiled_copy(const View& in, const View& out, Compiled c) {
  return [x = static_cast<const Bits*>(in.data), y = static_cast<Bits*>(out.data), c = std::move(c)] {
    const std::int32_t* at = c.at.data();
    const std::size_t n = c.at.size();
    for (std::size_t i = 0; i < n; i += 2) y[at[i + 1]] = x[at[i]];
  };
}

template <class T>
std::function<void()> compiled_fill(const View& out, double value, Compiled c) {
  return [y = static_cast<T*>(out.data), v = element::convert<T>(value), c = std::move(c)] {
    for (const std::int32_t at : c.at) y[at] = v;
  };
}

}  // namespace

// VTAPE_CPU_RECORDING=0 runs every plan step by step (to bisect a wrong result, or to measure what recording buys).
bool CpuBackend::records(std::int64_t call_bytes, bool repeated) const {
  static const bool enabled = [] {
    const char* setting = std::getenv("VTAPE_CPU_RECORDING");
    return !(setting && std::string_view(setting) == "0");
  }();
  return enabled && (repeated || call_bytes <= recorded_bytes);
}

bool CpuBackend::begin_recording() {
  if (now) return false;
  now = new CpuRecording();
  return true;
}

std::unique_ptr<Recording> CpuBackend::end_recording() {
  std::unique_ptr<Recording> recording(now);
  now = nullptr;
  return recording;
}

bool CpuBackend::recording() { return now != nullptr; }

void CpuBackend::keep(std::function<void()> call) { now->calls.push_back(std::move(call)); }

void CpuBackend::keep_memory(void* p) { now->memory.insert(p); }

bool CpuBackend::kept_memory(void* p) { return now->memory.contains(p); }

// Float arithmetic whose result is one IEEE operation per element: the same bits as the kernel's.
void CpuBackend::keep_binary(BinaryKind kind, const View& a, const View& b, const View& out) {
  Compiled c;
  if (a.dtype == out.dtype && b.dtype == out.dtype && (out.dtype == DType::f64 || out.dtype == DType::f32) &&
      compile({&a, &b, &out}, out.shape, c)) {
    std::function<void()> call = out.dtype == DType::f64 ? compiled_binary<double>(kind, a, b, out, std::move(c))
                                                         : compiled_binary<float>(kind, a, b, out, std::move(c));
    if (call) return keep(std::move(call));
  }
  keep([=, this] { binary(kind, a, b, out); });
}

// A copy within one dtype moves bits.
void CpuBackend::keep_copy(const View& in, const View& out) {
  Compiled c;
  const std::size_t size = size_of(out.dtype);
  if (in.dtype == out.dtype && (size == 8 || size == 4) && compile({&in, &out}, out.shape, c))
    return keep(size == 8 ? compiled_copy<std::uint64_t>(in, out, std::move(c))
                          : compiled_copy<std::uint32_t>(in, out, std::move(c)));
  keep([=, this] { copy(in, out); });
}

void CpuBackend::keep_fill(const View& out, double value) {
  Compiled c;
  if ((out.dtype == DType::f64 || out.dtype == DType::f32) && compile({&out}, out.shape, c))
    return keep(out.dtype == DType::f64 ? compiled_fill<double>(out, value, std::move(c))
                                        : compiled_fill<float>(out, value, std::move(c)));
  keep([=, this] { fill(out, value); });
}

}  // namespace vt::cpu
