// Tensors printed as numpy prints arrays (numpy/core/arrayprint.py: array_repr, _formatArray and
// FloatingFormat with floatmode 'maxprec'), so that a user comparing with numpy sees the same text.
#include "print.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "tensor.hpp"

namespace vt {

namespace {

std::mutex options_mutex;
PrintOptions current_options;

// The elements a print shows: the whole tensor, or when summarised the first and last `edge`
// entries of each axis longer than 2 edge. `shape` is the shown array's, `cut` the axes summarised.
template <class T>
struct Shown {
  Shape shape;
  std::vector<bool> cut;
  std::vector<T> values;  // row-major over `shape`
};

// A device copies a strided view of at most 8 axes that cannot merge (the CUDA kernels' limit): a
// block of more is read by its leading axis, one slice after another.
constexpr std::size_t max_read_axes = 8;
void read_block(Device device, const View& v, DType as, void* out) {
  if (v.shape.size() <= max_read_axes || device.kind == DeviceKind::cpu) {
    detail::read_to_host(device, v, as, out);
    return;
  }
  View slice = v;
  slice.shape.erase(slice.shape.begin());
  slice.strides.erase(slice.strides.begin());
  const std::size_t bytes = static_cast<std::size_t>(numel(slice.shape)) * size_of(as);
  for (std::int64_t i = 0; i < v.shape[0]; ++i) {
    read_block(device, slice, as, static_cast<char*>(out) + static_cast<std::size_t>(i) * bytes);
    slice.data = static_cast<char*>(slice.data) + v.strides[0] * size_of(v.dtype);
  }
}

// Reads the shown elements, one block per combination of leading and trailing ranges (at most
// 2^rank reads), so that printing a large tensor never copies the whole of it to the host.
template <class T>
Shown<T> shown_elements(const Tensor& t, const View& full, bool summarise, std::int64_t edge) {
  Shown<T> s;
  const std::size_t rank = full.shape.size();
  s.cut.resize(rank);
  for (std::size_t a = 0; a < rank; ++a) {
    s.cut[a] = summarise && full.shape[a] > 0 && edge <= (full.shape[a] - 1) / 2;  // more than 2 edge entries
    s.shape.push_back(s.cut[a] ? 2 * edge : full.shape[a]);
  }
  s.values.resize(static_cast<std::size_t>(numel(s.shape)));
  if (s.values.empty()) return s;
  const Shape shown_strides = contiguous_strides(s.shape);
  const DType as = dtype_of<T>();
  std::vector<std::size_t> cut_axes;  // fewer than 40: each holds at least 3 elements
  for (std::size_t a = 0; a < rank; ++a)
    if (s.cut[a]) cut_axes.push_back(a);
  std::vector<T> block;
  // Each corner takes the leading or the trailing entries of every cut axis; the others are read whole.
  for (std::uint64_t corner = 0; corner < (std::uint64_t{1} << cut_axes.size()); ++corner) {
    View v = full;
    std::int64_t shown_offset = 0;
    for (std::size_t c = 0; c < cut_axes.size(); ++c) {
      const std::size_t a = cut_axes[c];
      v.shape[a] = edge;
      if ((corner >> c) & 1) {
        v.data = static_cast<char*>(v.data) + (full.shape[a] - edge) * full.strides[a] * size_of(full.dtype);
        shown_offset += edge * shown_strides[a];
      }
    }
    block.resize(static_cast<std::size_t>(numel(v.shape)));
    read_block(t.device(), v, as, block.data());
    // Scatter the block into the shown array: walk its elements in row-major order.
    const Shape block_strides = contiguous_strides(v.shape);
    for (std::size_t k = 0; k < block.size(); ++k) {
      std::int64_t at = shown_offset, rest = static_cast<std::int64_t>(k);
      for (std::size_t a = 0; a < rank; ++a) {
        at += rest / block_strides[a] * shown_strides[a];
        rest %= block_strides[a];
      }
      s.values[static_cast<std::size_t>(at)] = block[k];
    }
  }
  return s;
}

// How every element of one print is written: numpy's FloatingFormat, or plain integers.
struct Style {
  bool scientific = false;
  int digits = 0;      // scientific: digits after the point, every element
  int pad_left = 0;    // characters before the point (sign included)
  int pad_right = 0;   // characters after the point (scientific: mantissa digits, 'e', exponent)
  int exp_digits = 2;  // scientific: exponent digits
};

// The shortest text that reads back as x, with at most `precision` digits after the point
// (rounded there otherwise), trailing zeros dropped but the point kept: "1.", "0.25", "1.e+10".
template <class T>
std::string shortest(T x, int precision, bool scientific) {
  char buf[512];
  const auto format = scientific ? std::chars_format::scientific : std::chars_format::fixed;
  auto r = std::to_chars(buf, buf + sizeof buf, x, format);
  std::string s(buf, r.ptr);
  const std::size_t e = scientific ? s.find('e') : s.size();
  const std::size_t point = s.find('.');
  const std::size_t decimals = point == std::string::npos || point > e ? 0 : e - point - 1;
  if (static_cast<int>(decimals) > precision) {
    r = std::to_chars(buf, buf + sizeof buf, x, format, precision);
    s.assign(buf, r.ptr);
  }
  std::size_t mantissa_end = scientific ? s.find('e') : s.size();
  if (s.find('.') == std::string::npos) {
    s.insert(mantissa_end, ".");
    return s;
  }
  std::size_t last = mantissa_end;
  while (s[last - 1] == '0') --last;
  return s.erase(last, mantissa_end - last);
}

// The mantissa's integer part, its fraction and the exponent of a shortest() text.
struct Parts {
  std::string integer, fraction, exponent;  // exponent: sign and digits, scientific only
};
Parts parts_of(const std::string& s) {
  Parts p;
  const std::size_t point = s.find('.');
  const std::size_t e = s.find('e');
  p.integer = s.substr(0, point);
  p.fraction = s.substr(point + 1, (e == std::string::npos ? s.size() : e) - point - 1);
  if (e != std::string::npos) p.exponent = s.substr(e + 1);
  return p;
}

template <class T>
Style float_style(const std::vector<T>& values, int precision) {
  Style st;
  T max_abs = 0, min_abs = std::numeric_limits<T>::infinity();
  bool finite = false, non_finite = false, negative_inf = false;
  for (T v : values) {
    if (std::isinf(v) && v < 0) negative_inf = true;
    non_finite |= !std::isfinite(v);
    if (!std::isfinite(v)) continue;
    finite = true;
    const T a = std::abs(v);
    if (a == 0) continue;
    max_abs = std::max(max_abs, a);
    min_abs = std::min(min_abs, a);
  }
  // numpy decides in the values' own type, and moves to scientific notation at
  // 10^min(8, the type's decimal digits): 1e6 for float32, 1e8 for float64.
  const T large = std::is_same_v<T, float> ? T(1e6) : T(1e8);
  if (finite) {
    st.scientific = max_abs > 0 && (max_abs >= large || min_abs < T(1e-4) || max_abs / min_abs > T(1000));
    int exp_len = 0;
    for (T v : values) {
      if (!std::isfinite(v)) continue;
      const Parts p = parts_of(shortest(v, precision, st.scientific));
      st.pad_left = std::max(st.pad_left, static_cast<int>(p.integer.size()));
      st.pad_right = std::max(st.pad_right, static_cast<int>(p.fraction.size()));
      exp_len = std::max(exp_len, static_cast<int>(p.exponent.size()));
    }
    if (st.scientific) {
      st.digits = st.pad_right;
      st.exp_digits = exp_len - 1;
      st.pad_right = st.digits + 2 + st.exp_digits;
    }
  }
  // Room for nan and inf (and -inf) in the columns, when there are any.
  const int offset = st.pad_right + 1;
  if (non_finite) st.pad_left = std::max({st.pad_left, 3 - offset, 3 + (negative_inf ? 1 : 0) - offset});
  return st;
}

template <class T>
std::string format_float(T v, const Style& st, int precision) {
  const int width = st.pad_left + 1 + st.pad_right;
  if (!std::isfinite(v)) {
    const char* text = std::isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
    return fmt::format("{:>{}}", text, width);
  }
  if (st.scientific) {
    // Every element with the column's digits, those of its exact value (numpy's min_digits).
    char buf[512];
    const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, st.digits);
    std::string text(buf, r.ptr);
    if (st.digits == 0) text.insert(text.find('e'), ".");
    const Parts p = parts_of(text);
    const char sign = p.exponent[0];
    std::string exp_digits = p.exponent.substr(1);
    exp_digits.insert(0, static_cast<std::size_t>(std::max(0, st.exp_digits - static_cast<int>(exp_digits.size()))),
                      '0');
    return fmt::format("{:>{}}.{}e{}{}", p.integer, st.pad_left, p.fraction, sign, exp_digits);
  }
  const Parts p = parts_of(shortest(v, precision, false));
  return fmt::format("{:>{}}.{:<{}}", p.integer, st.pad_left, p.fraction, st.pad_right);
}

// Every shown element as text, columns already aligned.
// Booleans (read as integers) print as numpy's True and False, which in an array are as wide as False.
template <class T>
std::vector<std::string> element_texts(const std::vector<T>& values, int precision, bool booleans, bool scalar) {
  std::vector<std::string> out;
  out.reserve(values.size());
  if constexpr (std::is_integral_v<T>) {
    std::size_t width = booleans && !scalar ? 5 : 0;
    for (T v : values)
      out.push_back(booleans ? std::string(v ? "True" : "False") : fmt::format("{}", v)),
          width = std::max(width, out.back().size());
    for (std::string& s : out) s.insert(0, width - s.size(), ' ');
  } else {
    const Style st = float_style(values, precision);
    for (T v : values) out.push_back(format_float(v, st, precision));
  }
  return out;
}

// numpy's _extendLine: a word goes on the current line, or starts a new one when it would pass
// the width (unless the line holds nothing yet, where wrapping would not help).
void extend_line(std::string& s, std::string& line, const std::string& word, std::int64_t width,
                 const std::string& indent) {
  const bool wrap = static_cast<std::int64_t>(line.size() + word.size()) > width && line.size() > indent.size();
  if (wrap) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    s += line + "\n";
    line = indent;
  }
  line += word;
}

// numpy's _formatArray over the shown elements.
struct Layout {
  const std::vector<std::string>& words;
  const Shape& shape;
  const std::vector<bool>& cut;
  Shape strides;
  std::int64_t edge;

  // The elements under `base` (a flat offset) from `axis` on.
  std::string recurse(std::size_t axis, std::int64_t base, const std::string& indent, std::int64_t width) const {
    if (axis == shape.size()) return words[static_cast<std::size_t>(base)];
    const std::string next_indent = indent + " ";
    const std::int64_t next_width = width - 1;
    const std::int64_t n = shape[axis];
    // Shown index i of this axis; a cut axis shows `edge` leading entries, then "...", then `edge`.
    auto child = [&](std::int64_t i) { return recurse(axis + 1, base + i * strides[axis], next_indent, next_width); };
    const bool summary = cut[axis];
    std::string s;
    if (axis + 1 == shape.size()) {
      const std::int64_t elem_width = width - 1;  // room for the separator's ',' or the ']'
      std::string line = indent;
      for (std::int64_t i = 0; i + 1 < n; ++i) {
        extend_line(s, line, child(i), elem_width, indent);
        line += ", ";
        if (summary && i + 1 == edge) {
          extend_line(s, line, "...", elem_width, indent);
          line += ", ";
        }
      }
      if (n > 0) extend_line(s, line, child(n - 1), elem_width, indent);
      s += line;
    } else {
      const std::string separator = "," + std::string(shape.size() - axis - 1, '\n');
      for (std::int64_t i = 0; i + 1 < n; ++i) {
        s += indent + child(i) + separator;
        if (summary && i + 1 == edge) s += indent + "..." + separator;
      }
      if (n > 0) s += indent + child(n - 1);
    }
    return "[" + s.substr(std::min(s.size(), indent.size())) + "]";
  }
};

template <class T>
std::string array_text(const Tensor& t, const View& full, const PrintOptions& o, int precision,
                       const std::string& indent, std::int64_t width, bool booleans = false) {
  const bool summarise = numel(full.shape) > o.threshold;
  const Shown<T> shown = shown_elements<T>(t, full, summarise, o.edgeitems);
  const std::vector<std::string> words = element_texts(shown.values, precision, booleans, full.shape.empty());
  const Layout layout{words, shown.shape, shown.cut, contiguous_strides(shown.shape), o.edgeitems};
  return layout.recurse(0, 0, indent, width);
}

}  // namespace

PrintOptions print_options() {
  std::lock_guard lock(options_mutex);
  return current_options;
}

void set_print_options(const PrintOptions& o) {
  if (o.precision < 0 || o.precision > 64) fail("set_print_options: precision is {}; it must be in 0..64", o.precision);
  if (o.threshold < 0) fail("set_print_options: threshold is {}; it must be >= 0", o.threshold);
  if (o.edgeitems < 1) fail("set_print_options: edgeitems is {}; it must be >= 1", o.edgeitems);
  if (o.linewidth < 1) fail("set_print_options: linewidth is {}; it must be >= 1", o.linewidth);
  std::lock_guard lock(options_mutex);
  current_options = o;
}

PrintOptionsScope::PrintOptionsScope(const PrintOptions& options) : previous_(print_options()) {
  set_print_options(options);
}

PrintOptionsScope::~PrintOptionsScope() {
  std::lock_guard lock(options_mutex);
  current_options = previous_;
}

}  // namespace vt

fmt::format_context::iterator fmt::formatter<vt::Tensor>::format(const vt::Tensor& t, format_context& ctx) const {
  auto out = ctx.out();
  if (!t.defined()) return fmt::format_to(out, "Tensor(undefined)");
  if (t.is_symbolic() && !t.impl().deferred)
    return fmt::format_to(out, "Tensor(traced, shape={}, dtype={}{})", vt::to_string(t.shape()), vt::name_of(t.dtype()),
                          t.is_batched() ? ", batched" : "");
  const vt::PrintOptions o = vt::print_options();
  const int digits = precision >= 0 ? precision : o.precision;
  vt::detail::materialize(t);            // a constant folded while tracing gets its values
  const vt::View full = vt::view_of(t);  // the batch, when there is one, is the leading axis
  const std::string prefix = "Tensor(";
  std::string suffix = fmt::format("dtype={}", vt::name_of(t.dtype()));
  if (t.is_batched()) suffix += fmt::format(", batch={}", t.impl().batch);
  std::string body;
  // As numpy's repr, the shape is written out where the text does not show it: an empty tensor
  // (other than [0]) and a summarised one.
  const std::int64_t count = vt::numel(full.shape);
  if ((count == 0 && full.shape.size() != 1) || count > o.threshold)
    suffix = fmt::format("shape={}, {}", vt::to_string(full.shape), suffix);
  if (count == 0) {
    body = "[]";
  } else {
    const std::string indent(prefix.size() + 1, ' ');
    const std::int64_t width = o.linewidth - 1;  // the ',' after the elements
    switch (t.dtype()) {
      case vt::DType::f32: body = vt::array_text<float>(t, full, o, digits, indent, width); break;
      case vt::DType::f64: body = vt::array_text<double>(t, full, o, digits, indent, width); break;
      case vt::DType::i32:
      case vt::DType::i64: body = vt::array_text<std::int64_t>(t, full, o, digits, indent, width); break;
      case vt::DType::boolean: body = vt::array_text<std::int64_t>(t, full, o, digits, indent, width, true); break;
    }
  }
  // The dtype goes on a line of its own when it and the closing parenthesis would pass the width
  // (numpy's array_repr).
  const std::string text = prefix + body + ",";
  const std::size_t last_line = text.size() - (text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  const bool own_line = static_cast<std::int64_t>(last_line + suffix.size() + 2) > o.linewidth;
  return fmt::format_to(out, "{}{}{})", text, own_line ? "\n" + std::string(prefix.size(), ' ') : " ", suffix);
}
