#pragma once
#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
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
  Shape(std::initializer_list<value_type> values) { assign(values.begin(), values.end()); }
  explicit Shape(size_type count, value_type value = 0) { assign(count, value); }
  template <std::input_iterator It>
  Shape(It first, It last) {
    assign(first, last);
  }
  Shape(const std::vector<value_type>& values) { assign(values.begin(), values.end()); }  // NOLINT: converts
  Shape(const Shape& other) { assign(other.begin(), other.end()); }
  Shape(Shape&& other) noexcept { take(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  Shape& operator=(std::initializer_list<value_type> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~Shape() { release(); }
  operator std::vector<value_type>() const { return {begin(), end()}; }  // NOLINT: converts

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
  void resize(size_type n, value_type value = 0) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) data_[i] = value;
    size_ = static_cast<std::uint32_t>(n);
  }
  void push_back(value_type value) {
    if (size_ == capacity_) grow(2 * static_cast<size_type>(capacity_));
    data_[size_++] = value;
  }
  reference emplace_back(value_type value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }
  void assign(size_type count, value_type value) {
    clear();
    resize(count, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>) reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<value_type>(*first));
  }
  void assign(std::initializer_list<value_type> values) { assign(values.begin(), values.end()); }
  iterator insert(const_iterator pos, value_type value) { return insert(pos, size_type{1}, value); }
  iterator insert(const_iterator pos, size_type count, value_type value) {
    const iterator at = open(pos, count);
    std::fill(at, at + count, value);
    return at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const Shape values(first, last);  // the source may be this shape
    const iterator at = open(pos, values.size());
    std::copy(values.begin(), values.end(), at);
    return at;
  }
  iterator insert(const_iterator pos, std::initializer_list<value_type> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = const_cast<iterator>(first);
    std::copy(const_cast<iterator>(last), end(), at);
    size_ -= static_cast<std::uint32_t>(last - first);
    return at;
  }
  void swap(Shape& other) noexcept {
    Shape t(std::move(other));
    other = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const Shape& a, const Shape& b) noexcept {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  bool on_heap() const noexcept { return data_ != inline_; }
  void release() noexcept {
    if (on_heap()) std::free(data_);
    data_ = inline_;
    size_ = 0;
    capacity_ = inline_rank;
  }
  void take(Shape& other) noexcept {
    if (other.on_heap()) {
      data_ = other.data_;
      capacity_ = other.capacity_;
    } else {
      std::memcpy(inline_, other.inline_, sizeof inline_);  // a fixed size: no bounds for the compiler to doubt
    }
    size_ = other.size_;
    other.data_ = other.inline_;
    other.size_ = 0;
    other.capacity_ = inline_rank;
  }
  void grow(size_type n);
  // Makes room for `count` entries at `pos`, moving those after it; returns where the room starts.
  iterator open(const_iterator pos, size_type count) {
    const auto offset = static_cast<size_type>(pos - data_);
    reserve(size_ + count);
    std::copy_backward(data_ + offset, data_ + size_, data_ + size_ + count);
    size_ += static_cast<std::uint32_t>(count);
    return data_ + offset;
  }

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
