#include "npy.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>
#include <string_view>

namespace vt {

namespace {
constexpr char magic[] = "\x93NUMPY";

// numpy's own limit on a header it will read (max_header_size): far more than any float array's.
constexpr std::uint32_t max_header = 10000;

// The text after `'key':` in a .npy header (a Python dict literal), spaces skipped; empty when the
// key is absent. Plain string search: no regex, whose recursion a hostile header could overflow.
std::string_view value_of(std::string_view header, std::string_view key) {
  // Appended, not `"'" + std::string(key) + "'"`, which GCC 12 misreads as overlapping copies
  // (-Wrestrict, GCC bug 105329).
  std::string quoted(1, '\'');
  quoted.append(key).push_back('\'');
  std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  at = header.find_first_not_of(" ", at + quoted.size());
  if (at == std::string_view::npos || header[at] != ':') return {};
  at = header.find_first_not_of(" ", at + 1);
  return at == std::string_view::npos ? std::string_view() : header.substr(at);
}
// numpy's name of a dtype, little-endian as every machine vtape runs on.
const char* descr_of(DType d) {
  switch (d) {
    case DType::f32: return "<f4";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::boolean: return "|b1";
    case DType::f64: break;
  }
  return "<f8";
}
}  // namespace

Tensor load_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("load_npy: cannot open '{}'", path);
  char head[8];
  if (!in.read(head, 8) || std::memcmp(head, magic, 6) != 0) fail("load_npy: '{}' is not a .npy file", path);
  const int major = static_cast<unsigned char>(head[6]);
  std::uint32_t header_len = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<std::uint32_t>(b[3]) << 24);
  } else {
    fail("load_npy: '{}' has unsupported format version {}", path, major);
  }
  if (header_len > max_header)
    fail("load_npy: '{}' has a header of {} bytes, more than numpy writes for an array ({})", path, header_len,
         max_header);
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail("load_npy: '{}' has a truncated header", path);

  const std::string_view descr_field = value_of(header, "descr");
  const std::size_t descr_end = descr_field.size() > 1 ? descr_field.find('\'', 1) : std::string_view::npos;
  if (descr_field.empty() || descr_field[0] != '\'' || descr_end == std::string_view::npos)
    fail("load_npy: '{}' has no dtype in its header", path);
  const std::string descr(descr_field.substr(1, descr_end - 1));
  DType dtype;
  if (descr == "<f8") dtype = DType::f64;
  else if (descr == "<f4") dtype = DType::f32;
  else if (descr == "<i8") dtype = DType::i64;
  else if (descr == "<i4") dtype = DType::i32;
  else if (descr == "|b1") dtype = DType::boolean;
  else
    fail(
        "load_npy: '{}' holds dtype '{}'; vtape reads float32 ('<f4'), float64 ('<f8'), int32 ('<i4'), int64 "
        "('<i8') and bool ('|b1')",
        path, descr);
  if (value_of(header, "fortran_order").substr(0, 4) == "True")
    fail("load_npy: '{}' is in Fortran order; save it in C order (np.ascontiguousarray)", path);
  const std::string_view shape_field = value_of(header, "shape");
  const std::size_t close = shape_field.find(')');
  if (shape_field.empty() || shape_field[0] != '(' || close == std::string_view::npos)
    fail("load_npy: '{}' has no shape in its header", path);
  const std::string_view dims = shape_field.substr(1, close - 1);  // "3, 4" or "3," or ""
  Shape shape;
  for (std::size_t at = 0; at < dims.size();) {
    const std::size_t comma = std::min(dims.find(',', at), dims.size());
    std::string_view item = dims.substr(at, comma - at);
    item.remove_prefix(std::min(item.find_first_not_of(' '), item.size()));
    item.remove_suffix(item.size() - std::min(item.find_last_not_of(' ') + 1, item.size()));
    at = comma + 1;
    if (item.empty() && comma == dims.size()) break;  // after a trailing comma
    std::int64_t d = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), d);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || d < 0)
      fail("load_npy: '{}' has a dimension '{}' out of range in its shape ({})", path, item, dims);
    shape.push_back(d);
  }
  // The file must hold the data before it is allocated: a corrupt shape must not ask for terabytes.
  const std::int64_t bytes =
      checked_numel(shape, "load_npy", size_of(dtype)) * static_cast<std::int64_t>(size_of(dtype));
  // (A stream that cannot seek, a pipe, is read as it comes: a short one fails the read instead.)
  const std::streamoff data_start = in.tellg();
  if (data_start >= 0 && in.seekg(0, std::ios::end)) {
    const std::streamoff available = in.tellg() - data_start;
    in.seekg(data_start);
    if (available < bytes)
      fail("load_npy: '{}' holds {} bytes of data, fewer than its shape {} needs ({})", path, available,
           to_string(shape), bytes);
  }
  in.clear();
  Tensor t = Tensor::empty(shape, dtype);
  if (!in.read(static_cast<char*>(const_cast<void*>(t.raw_data())), static_cast<std::streamsize>(bytes)))
    fail("load_npy: '{}' holds fewer values than its shape {} needs", path, to_string(shape));
  if (dtype == DType::boolean) {  // a bool is one byte, 0 or 1: any other byte is true, as numpy reads it
    auto* b = static_cast<unsigned char*>(const_cast<void*>(t.raw_data()));
    for (std::int64_t i = 0; i < bytes; ++i) b[i] = b[i] != 0;
  }
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  Shape shape = t.shape();
  if (t.is_batched()) shape.insert(shape.begin(), t.batch_size());
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(t.dtype()), dims);
  // Pad so that the data starts on a 64-byte boundary, ending the header with a newline.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) fail("save_npy: cannot write '{}'", path);
  out.write(magic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const auto len = static_cast<std::uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  visit_dtype(is_boolean(t.dtype()) ? DType::i32 : t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> v = t.to_vector<T>();
    if (is_boolean(t.dtype())) {  // one byte each, 0 or 1
      const std::vector<char> bytes(v.begin(), v.end());
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      return;
    }
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  });
  if (!out) fail("save_npy: writing '{}' failed", path);
}

}  // namespace vt
