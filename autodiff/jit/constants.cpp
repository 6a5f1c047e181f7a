// What the passes read of captured tensors' values (plan.hpp): whether one equals its transpose, is diagonal, holds
// ones, is an indicator matrix. Each answer is kept with the tensor's storage while that lives (Facts), so that a plan
// built again over the same captured data (another jit of the function, a loop's body traced again) does not read it
// again: compile time is one read of each captured tensor the first time a plan asks, then independent of its size.
// Tensors are immutable (a numpy array that a tensor borrows must not be written while the tensor is in use), so an
// answer stays right while the storage lives; a storage freed and another made at its address is told apart by the
// weak pointer each answer keeps.
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "../../core/backend.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

// What is known of one tensor's values; -1: not read yet.
struct Facts {
  signed char symmetric = -1, diagonal = -1, ones = -1;
  std::optional<std::vector<std::int64_t>> indicator_columns;
};

// A tensor's values: its storage, where in it, and how they are laid out.
using Key = std::tuple<const Storage*, std::int64_t, DType, Shape>;

class FactsCache {
 public:
  static FactsCache& instance() {
    static FactsCache cache;
    return cache;
  }
  std::optional<Facts> find(const Tensor& t) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key_of(t));
    if (it == entries_.end()) return std::nullopt;
    if (it->second.storage.lock() != t.impl().storage) {  // another storage at a freed one's address
      entries_.erase(it);
      return std::nullopt;
    }
    return it->second.facts;
  }
  template <class Update>
  void update(const Tensor& t, const Update& update) {
    const std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[key_of(t)];
    if (e.storage.lock() != t.impl().storage) e = Entry{t.impl().storage, {}};
    update(e.facts);
    if (entries_.size() >= sweep_at_) {  // forget the tensors that died, now and then
      std::erase_if(entries_, [](const auto& kv) { return kv.second.storage.expired(); });
      sweep_at_ = std::max<std::size_t>(64, 2 * entries_.size());
    }
  }

 private:
  struct Entry {
    std::weak_ptr<Storage> storage;
    Facts facts;
  };
  static Key key_of(const Tensor& t) { return {t.impl().storage.get(), t.impl().offset, t.dtype(), t.shape()}; }
  std::mutex mutex_;
  std::map<Key, Entry> entries_;
  std::size_t sweep_at_ = 64;
};

// The fact of t that `field` holds: read by `compute` the first time a plan asks, then remembered.
template <class Compute>
bool remembered(const Tensor& t, signed char Facts::*field, const Compute& compute) {
  FactsCache& cache = FactsCache::instance();
  if (const std::optional<Facts> known = cache.find(t); known && (*known).*field >= 0) return (*known).*field != 0;
  const bool answer = compute();
  cache.update(t, [&](Facts& f) { f.*field = answer ? 1 : 0; });
  return answer;
}

template <class Compute>
std::vector<std::int64_t> remembered_columns(const Tensor& t, const Compute& compute) {
  FactsCache& cache = FactsCache::instance();
  if (const std::optional<Facts> known = cache.find(t); known && known->indicator_columns)
    return *known->indicator_columns;
  std::vector<std::int64_t> columns = compute();
  cache.update(t, [&](Facts& f) { f.indicator_columns = columns; });
  return columns;
}

// A captured tensor's elements as T, on the host: host memory is read in place, another device's copied into `copy`
// (tensors are aligned to their dtype).
template <class T>
const T* host_elements(const PlanValue& v, std::vector<T>& copy) {
  const T* data = static_cast<const T*>(v.constant.raw_data());
  if (v.constant.device() == Device::cpu()) return data;
  copy.resize(static_cast<std::size_t>(numel(v.shape)));
  backend_for(v.constant.device()).to_host(copy.data(), data, copy.size() * sizeof(T));
  return copy.data();
}

}  // namespace

// Whether captured tensors x and y hold equal values (transposed: y = x^T, matrix by matrix), as
// when the user captures both F and F.t(), computed eagerly. Constants are fixed for the plan's
// life; they are read here only for operands of matching shapes. Comparing reads the constants, so
// compile time would grow with them: only constants of at most most_elements are compared.
namespace {

// same_constant_values of two values (`one`: the same value).
bool equal_values(const PlanValue& vx, const PlanValue& vy, bool one, bool transposed, std::int64_t most_elements) {
  if (vx.kind != PlanValue::Kind::constant || vy.kind != PlanValue::Kind::constant || vx.batched || vy.batched ||
      vx.dtype != vy.dtype || (transposed && vx.shape.size() < 2))
    return false;
  const std::size_t r = vx.shape.size();
  Shape expected = vx.shape;
  if (transposed) std::swap(expected[r - 1], expected[r - 2]);
  if (vy.shape != expected || vx.constant.device() != vy.constant.device() || numel(vx.shape) > most_elements)
    return false;
  if (one && !transposed) return true;
  // Compared as words of the element size: bits, not values.
  const auto equal_as = [&](auto word) {
    using Word = decltype(word);
    const auto count = static_cast<std::size_t>(numel(vx.shape));
    std::vector<Word> copy_x, copy_y;
    const Word *hx = host_elements(vx, copy_x), *hy = host_elements(vy, copy_y);
    if (!transposed) return std::equal(hx, hx + count, hy);
    const std::int64_t rows = vx.shape[r - 2], cols = vx.shape[r - 1];
    const std::int64_t matrices = rows * cols == 0 ? 0 : numel(vx.shape) / (rows * cols);
    // Tile by tile, so that the transposed reads stay in cache, their differences or-ed so that a tile's loop has
    // no branch; a matrix against its own transpose reads the tiles on and above the diagonal only.
    constexpr std::int64_t tile = 16;
    for (std::int64_t m = 0; m < matrices; ++m)
      for (std::int64_t i0 = 0; i0 < rows; i0 += tile)
        for (std::int64_t j0 = one ? i0 : 0; j0 < cols; j0 += tile) {
          Word differ = 0;
          for (std::int64_t i = i0; i < std::min(i0 + tile, rows); ++i)
            for (std::int64_t j = j0; j < std::min(j0 + tile, cols); ++j)
              differ |= hx[(m * rows + i) * cols + j] ^ hy[(m * cols + j) * rows + i];
          if (differ != 0) return false;
        }
    return true;
  };
  if (!one) return visit_element_word(vx.dtype, equal_as);
  return remembered(vx.constant, &Facts::symmetric, [&] { return visit_element_word(vx.dtype, equal_as); });
}

}  // namespace

bool same_constant_values(const PlanIR& plan, int x, int y, bool transposed, std::int64_t most_elements) {
  return equal_values(plan.values[static_cast<std::size_t>(x)], plan.values[static_cast<std::size_t>(y)], x == y,
                      transposed, most_elements);
}

bool symmetric_constant(const PlanValue& v) {
  // At most 2^20 elements (8 MiB of float64): beyond, the first compile would take long.
  return v.kind == PlanValue::Kind::constant && v.shape.size() == 2 && v.shape[0] == v.shape[1] &&
         equal_values(v, v, true, true, 1 << 20);
}

// Whether a captured tensor is a square matrix (or a stack of them) whose entries off the diagonal
// are all zeros (+0 or -0), read in place on the host like same_constant_values (up to 2^18
// elements, so compile time stays bounded).
bool diagonal_constant(const PlanValue& v) {
  if (v.kind != PlanValue::Kind::constant || v.shape.size() < 2) return false;
  const std::size_t r = v.shape.size();
  const std::int64_t n = v.shape[r - 1];
  constexpr std::int64_t max_read = std::int64_t{1} << 18;
  if (v.shape[r - 2] != n || numel(v.shape) > max_read || (v.dtype != DType::f64 && v.dtype != DType::f32))
    return false;
  const auto zero_off_diagonal = [&](auto zero) {
    using T = decltype(zero);
    const auto count = static_cast<std::size_t>(numel(v.shape));
    std::vector<T> copy;
    const T* h = host_elements(v, copy);
    // Row by row, each row's entries before and after its diagonal one: no division per element, as
    // this runs at every compile (a captured identity, say).
    for (const T* row = h; row < h + count; row += n) {
      const std::int64_t i = ((row - h) / n) % n;  // the row's index in its matrix
      for (std::int64_t j = 0; j < n; ++j)
        if (j != i && row[j] != T(0)) return false;
    }
    return true;
  };
  return remembered(v.constant, &Facts::diagonal,
                    [&] { return v.dtype == DType::f64 ? zero_off_diagonal(0.0) : zero_off_diagonal(0.0f); });
}

// Whether a captured tensor holds 1 in every element (read on the host, up to 2^18 elements).
bool ones_constant(const PlanValue& v) {
  if (v.kind != PlanValue::Kind::constant || v.batched || numel(v.shape) > (std::int64_t{1} << 18) ||
      (v.dtype != DType::f64 && v.dtype != DType::f32))
    return false;
  const auto all_ones = [&](auto one) {
    using T = decltype(one);
    std::vector<T> copy;
    const T* h = host_elements(v, copy);
    return std::all_of(h, h + numel(v.shape), [&](T x) { return x == one; });
  };
  return remembered(v.constant, &Facts::ones, [&] { return v.dtype == DType::f64 ? all_ones(1.0) : all_ones(1.0f); });
}

// For a captured matrix whose row r is 0 (+0 or -0) but for one 1, in column c_r (an indicator of which group each row
// is in), the columns c; empty for any other. Read on the host, row by row, stopping at the first entry that is neither
// 0 nor 1 or at a second 1: a dense matrix costs a few reads, an indicator one pass over it, what one call of its
// product reads anyway (up to 2^24 entries).
std::vector<std::int64_t> indicator_columns(const PlanValue& v) {
  constexpr std::int64_t max_read = std::int64_t{1} << 24;
  if (v.kind != PlanValue::Kind::constant || v.batched || v.shape.size() != 2 || numel(v.shape) > max_read ||
      numel(v.shape) == 0 || (v.dtype != DType::f64 && v.dtype != DType::f32))
    return {};
  const std::int64_t rows = v.shape[0], cols = v.shape[1];
  const auto scan = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> copy;
    const T* h = host_elements(v, copy);
    std::vector<std::int64_t> column(static_cast<std::size_t>(rows), -1);
    for (std::int64_t r = 0; r < rows; ++r) {
      const T* row = h + r * cols;
      for (std::int64_t j = 0; j < cols; ++j) {
        if (row[j] == T(0)) continue;
        if (row[j] != T(1) || column[static_cast<std::size_t>(r)] >= 0) return std::vector<std::int64_t>{};
        column[static_cast<std::size_t>(r)] = j;
      }
      if (column[static_cast<std::size_t>(r)] < 0) return std::vector<std::int64_t>{};
    }
    return column;
  };
  return remembered_columns(v.constant, [&] { return v.dtype == DType::f64 ? scan(0.0) : scan(0.0f); });
}

}  // namespace vt::detail
