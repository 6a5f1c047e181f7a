#pragma once
// Shared by the backends' map kernels: the iteration space of N strided views of one shape, with
// unit axes dropped and adjacent axes merged wherever every view is contiguous across them, so
// that a contiguous tensor is walked as one row.
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "../core/shape.hpp"

namespace vt {

// A list of axis sizes or strides that holds up to `held` entries in place: merging a kernel's axes then allocates
// nothing, and a CPU map runs once per tile of a fused run, thousands of times a call. Longer lists (views of more
// axes than that that cannot merge) move to the heap.
class AxisList {
 public:
  static constexpr std::size_t held = 8;
  AxisList() = default;
  AxisList(const AxisList&) = default;
  AxisList& operator=(const AxisList&) = default;
  // A moved-from list is empty (a defaulted move would leave its size with its entries gone).
  AxisList(AxisList&& other) noexcept : held_(other.held_), heap_(std::move(other.heap_)), size_(other.size_) {
    other.heap_.clear();
    other.size_ = 0;
  }
  AxisList& operator=(AxisList&& other) noexcept {
    held_ = other.held_;
    heap_ = std::move(other.heap_);
    size_ = other.size_;
    other.heap_.clear();
    other.size_ = 0;
    return *this;
  }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::int64_t* data() { return heap_.empty() ? held_.data() : heap_.data(); }
  const std::int64_t* data() const { return heap_.empty() ? held_.data() : heap_.data(); }
  std::int64_t& operator[](std::size_t i) { return data()[i]; }
  std::int64_t operator[](std::size_t i) const { return data()[i]; }
  std::int64_t& back() { return data()[size_ - 1]; }
  std::int64_t back() const { return data()[size_ - 1]; }
  void push_back(std::int64_t v) {
    if (heap_.empty() && size_ < held) {
      held_[size_++] = v;
      return;
    }
    if (heap_.empty()) heap_.assign(held_.begin(), held_.begin() + static_cast<std::ptrdiff_t>(size_));
    heap_.push_back(v);
    ++size_;
  }
  void pop_back() {
    if (!heap_.empty()) heap_.pop_back();
    --size_;
  }
  // n entries, all v.
  void assign(std::size_t n, std::int64_t v) {
    size_ = 0;
    heap_.clear();
    for (std::size_t i = 0; i < n; ++i) push_back(v);
  }

 private:
  std::array<std::int64_t, held> held_{};
  std::vector<std::int64_t> heap_;
  std::size_t size_ = 0;
};

inline std::int64_t numel(const AxisList& shape) {
  std::int64_t n = 1;
  for (std::size_t d = 0; d < shape.size(); ++d) n *= shape[d];
  return n;
}

template <std::size_t N>
struct MergedAxes {
  AxisList shape;  // empty for a single element (or when any axis has size 0: see `empty`)
  std::array<AxisList, N> strides;
  bool empty = false;  // some axis has size 0: nothing to visit
};

template <std::size_t N>
MergedAxes<N> merge_axes(const Shape& shape, const std::array<const Shape*, N>& strides) {
  MergedAxes<N> m;
  for (auto d : shape)
    if (d == 0) {
      m.empty = true;
      return m;
    }
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    bool merge = !m.shape.empty();
    for (std::size_t k = 0; k < N && merge; ++k) merge = m.strides[k].back() == (*strides[k])[d] * shape[d];
    if (merge) {
      m.shape.back() *= shape[d];
      for (std::size_t k = 0; k < N; ++k) m.strides[k].back() = (*strides[k])[d];
    } else {
      m.shape.push_back(shape[d]);
      for (std::size_t k = 0; k < N; ++k) m.strides[k].push_back((*strides[k])[d]);
    }
  }
  return m;
}

}  // namespace vt
