#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace vt {

/// A shape (or strides, or a list of axes): a std::vector<std::int64_t> in all but storage, which holds up to
/// `inline_rank` entries inside the object. Tracing and planning copy shapes at every op, and nearly all have few axes:
/// as vectors their heap allocations were a large part of a compile. It converts to and from std::vector<std::int64_t>.
class Shape {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = value_type&;
  using const_reference = const value_type&;
  using pointer = value_type*;
  using const_pointer = const value_type*;
  using iterator = value_type*;
  using const_iterator = const value_type*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  static constexpr size_type inline_rank = 6;

  Shape() noexcept {}
  // Copies, assignments and edits are out of line (shape.cpp): inlined into every file, each was instrumented again
  // in the sanitizers' build, and a call costs little beside the work it does.
  Shape(std::initializer_list<value_type> values);
  explicit Shape(size_type count, value_type value = 0);
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<value_type>& values);  // NOLINT: converts
  Shape(const Shape& other);
  Shape(Shape&& other) noexcept;
  Shape& operator=(const Shape& other);
  Shape& operator=(Shape&& other) noexcept;
  Shape& operator=(std::initializer_list<value_type> values);
  ~Shape() {
    if (on_heap()) std::free(data_);
  }
  operator std::vector<value_type>() const;  // NOLINT: converts

  size_type size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_type capacity() const noexcept { return capacity_; }
  pointer data() noexcept { return data_; }
  const_pointer data() const noexcept { return data_; }
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  reference operator[](size_type i) noexcept { return data_[i]; }
  const_reference operator[](size_type i) const noexcept { return data_[i]; }
  reference at(size_type i);
  const_reference at(size_type i) const { return const_cast<Shape&>(*this).at(i); }
  reference front() noexcept { return data_[0]; }
  const_reference front() const noexcept { return data_[0]; }
  reference back() noexcept { return data_[size_ - 1]; }
  const_reference back() const noexcept { return data_[size_ - 1]; }

  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_type n, value_type value = 0);
  void push_back(value_type value) {
    if (size_ == capacity_) grow(2 * static_cast<size_type>(capacity_));
    data_[size_++] = value;
  }
  reference emplace_back(value_type value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void assign(size_type count, value_type value);
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::contiguous_iterator<It> && std::same_as<std::iter_value_t<It>, value_type>) {
      assign_copy(std::to_address(first), static_cast<size_type>(last - first));
    } else {
      clear();
      if constexpr (std::forward_iterator<It>) reserve(static_cast<size_type>(std::distance(first, last)));
      for (; first != last; ++first) push_back(static_cast<value_type>(*first));
    }
  }
  void assign(std::initializer_list<value_type> values);
  iterator insert(const_iterator pos, value_type value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type count, value_type value);
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape values(first, last);  // the source may be this shape
    return insert_copy(pos, values.data(), values.size());
  }
  iterator insert(const_iterator pos, std::initializer_list<value_type> values);
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last);
  void swap(Shape& other) noexcept;

  friend bool operator==(const Shape& a, const Shape& b) noexcept;
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept;

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void release() noexcept;
  void take(Shape& other) noexcept;
  void grow(size_type n);
  void assign_copy(const value_type* values, size_type count);                          // `values` outside this shape
  iterator insert_copy(const_iterator pos, const value_type* values, size_type count);  // likewise
  // Makes room for `count` entries at `pos`, moving those after it; returns where the room starts.
  iterator open(const_iterator pos, size_type count);

  value_type* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = inline_rank;
  value_type inline_[inline_rank] = {};
};

inline void swap(Shape& a, Shape& b) noexcept { a.swap(b); }

std::int64_t numel(const Shape& shape);  ///< of a shape already checked (every tensor's shape is)

/// The largest element or byte count vtape handles: sizes are int64 and pointer offsets must fit.
inline constexpr std::int64_t max_size = INT64_MAX;

/// Checked size arithmetic: a product or sum that would overflow max_size raises a vt::Error
/// naming `op` and `what`, instead of wrapping to a small number (and a too-small allocation).
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what);
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what);

/// The element count of `shape` times `copies` (a batch size), checking every dimension is >= 0 and
/// that the bytes, at `item_bytes` per element, fit: the one check every new shape passes.
std::int64_t checked_numel(const Shape& shape, std::string_view op, std::size_t item_bytes = 1,
                           std::int64_t copies = 1);
std::string to_string(const Shape& shape);     ///< "[2, 3]"
Shape contiguous_strides(const Shape& shape);  ///< row-major, in elements

/// numpy broadcasting of two shapes; `op` names the caller in the error.
Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op);

/// Maps a possibly negative axis into [0, rank), or raises an error naming `op`.
int normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op);

/// The axes of `axes` normalized, sorted and unique; empty `axes` means every axis.
std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank, std::string_view op);

}  // namespace vt
