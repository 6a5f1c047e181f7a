#include "shape.hpp"

#include <algorithm>

#include "error.hpp"

namespace vt {

Shape::Shape(std::initializer_list<value_type> values) { assign_copy(values.begin(), values.size()); }
Shape::Shape(size_type count, value_type value) { assign(count, value); }
Shape::Shape(const std::vector<value_type>& values) { assign_copy(values.data(), values.size()); }
Shape::Shape(const Shape& other) { assign_copy(other.data_, other.size_); }
Shape::Shape(Shape&& other) noexcept { take(other); }

Shape& Shape::operator=(const Shape& other) {
  if (this != &other) assign_copy(other.data_, other.size_);
  return *this;
}

Shape& Shape::operator=(Shape&& other) noexcept {
  if (this != &other) {
    release();
    take(other);
  }
  return *this;
}

Shape& Shape::operator=(std::initializer_list<value_type> values) {
  assign_copy(values.begin(), values.size());
  return *this;
}

Shape::operator std::vector<value_type>() const { return {begin(), end()}; }

void Shape::resize(size_type n, value_type value) {
  reserve(n);
  for (size_type i = size_; i < n; ++i) data_[i] = value;
  size_ = static_cast<std::uint32_t>(n);
}

void Shape::assign(size_type count, value_type value) {
  clear();
  resize(count, value);
}

void Shape::assign(std::initializer_list<value_type> values) { assign_copy(values.begin(), values.size()); }

void Shape::assign_copy(const value_type* values, size_type count) {
  clear();
  reserve(count);
  if (count) std::memcpy(data_, values, count * sizeof(value_type));
  size_ = static_cast<std::uint32_t>(count);
}

Shape::iterator Shape::insert(const_iterator pos, size_type count, value_type value) {
  const iterator at = open(pos, count);
  std::fill(at, at + count, value);
  return at;
}

Shape::iterator Shape::insert(const_iterator pos, std::initializer_list<value_type> values) {
  return insert_copy(pos, values.begin(), values.size());
}

Shape::iterator Shape::insert_copy(const_iterator pos, const value_type* values, size_type count) {
  const iterator at = open(pos, count);
  std::copy(values, values + count, at);
  return at;
}

Shape::iterator Shape::open(const_iterator pos, size_type count) {
  const auto offset = static_cast<size_type>(pos - data_);
  reserve(size_ + count);
  std::copy_backward(data_ + offset, data_ + size_, data_ + size_ + count);
  size_ += static_cast<std::uint32_t>(count);
  return data_ + offset;
}

Shape::iterator Shape::erase(const_iterator first, const_iterator last) {
  const auto at = const_cast<iterator>(first);
  std::copy(const_cast<iterator>(last), end(), at);
  size_ -= static_cast<std::uint32_t>(last - first);
  return at;
}

void Shape::swap(Shape& other) noexcept {
  Shape t(std::move(other));
  other = std::move(*this);
  *this = std::move(t);
}

bool operator==(const Shape& a, const Shape& b) noexcept {
  return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
}

std::strong_ordering operator<=>(const Shape& a, const Shape& b) noexcept {
  return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
}

void Shape::release() noexcept {
  if (on_heap()) std::free(data_);
  data_ = inline_;
  size_ = 0;
  capacity_ = inline_rank;
}

void Shape::take(Shape& other) noexcept {
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

Shape::reference Shape::at(size_type i) {
  if (i >= size_) fail("Shape::at: index {} out of range for a shape of {} axes", i, size_);
  return data_[i];
}

void Shape::grow(size_type n) {
  if (n > UINT32_MAX) fail("a shape of {} axes is too long", n);
  const size_type capacity = std::max<size_type>(n, 2 * static_cast<size_type>(capacity_));
  auto* data = static_cast<value_type*>(std::malloc(capacity * sizeof(value_type)));
  if (!data) throw std::bad_alloc();
  std::memcpy(data, data_, size_ * sizeof(value_type));
  if (on_heap()) std::free(data_);
  data_ = data;
  capacity_ = static_cast<std::uint32_t>(std::min<size_type>(capacity, UINT32_MAX));
}

// A zero dimension makes a shape empty even where its other dimensions' product would overflow
// ([2^62, 3, 0] holds nothing), so zeros are looked for before anything is multiplied.
bool has_zero(const Shape& shape) { return std::find(shape.begin(), shape.end(), 0) != shape.end(); }

std::int64_t numel(const Shape& shape) {
  if (has_zero(shape)) return 0;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what) {
  std::int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r))
    fail("{}: {} overflows ({} x {} is out of range)", op, what, a, b);
  return r;
}

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view op, std::string_view what) {
  std::int64_t r;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r))
    fail("{}: {} overflows ({} + {} is out of range)", op, what, a, b);
  return r;
}

std::int64_t checked_numel(const Shape& shape, std::string_view op, std::size_t item_bytes, std::int64_t copies) {
  std::int64_t n = 1;
  bool overflow = copies < 0;
  for (auto d : shape)
    if (d < 0) fail("{}: negative dimension in shape {}", op, to_string(shape));
  if (has_zero(shape)) return 0;
  for (auto d : shape) overflow |= __builtin_mul_overflow(n, d, &n);
  std::int64_t total;
  overflow |= __builtin_mul_overflow(n, copies, &total);
  overflow |= __builtin_mul_overflow(total, static_cast<std::int64_t>(item_bytes), &total);
  if (overflow)
    fail("{}: shape {}{} is too large (its size in bytes overflows a 64-bit count)", op, to_string(shape),
         copies != 1 ? fmt::format(" times a batch of {}", copies) : std::string());
  return n * copies;
}

std::string to_string(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  std::int64_t s = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    // Only an empty shape's suffix products can overflow; its strides address nothing.
    if (__builtin_mul_overflow(s, shape[i], &s)) s = 0;
  }
  return strides;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, std::string_view op) {
  const std::size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("{}: shapes {} and {} cannot be broadcast together", op, to_string(a), to_string(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_axis(std::int64_t axis, std::size_t rank, std::string_view op) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fail("{}: axis {} is out of range for a tensor of rank {}", op, axis, rank);
  return static_cast<int>(axis < 0 ? axis + r : axis);
}

std::vector<int> normalize_axes(const std::vector<std::int64_t>& axes, std::size_t rank, std::string_view op) {
  std::vector<int> out;
  if (axes.empty()) {
    for (std::size_t i = 0; i < rank; ++i) out.push_back(static_cast<int>(i));
    return out;
  }
  for (auto a : axes) out.push_back(normalize_axis(a, rank, op));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail("{}: repeated axis in [{}]", op, fmt::join(axes, ", "));
  return out;
}

}  // namespace vt
