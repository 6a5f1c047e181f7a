#include "npy.hpp"

#include <charconv>
#include <cstring>
#include <fstream>
#include <regex>

namespace vt {

namespace {
constexpr char magic[] = "\x93NUMPY";
}

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
  if (header_len > (1u << 20)) fail("load_npy: '{}' has a header of {} bytes; a .npy header is small", path, header_len);
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) fail("load_npy: '{}' has a truncated header", path);

  std::smatch m;
  if (!std::regex_search(header, m, std::regex(R"('descr'\s*:\s*'([^']*)')")))
    fail("load_npy: '{}' has no dtype in its header", path);
  const std::string descr = m[1];
  DType dtype;
  if (descr == "<f8") dtype = DType::f64;
  else if (descr == "<f4") dtype = DType::f32;
  else fail("load_npy: '{}' holds dtype '{}'; vtape reads float32 ('<f4') and float64 ('<f8')", path, descr);
  if (std::regex_search(header, std::regex(R"('fortran_order'\s*:\s*True)")))
    fail("load_npy: '{}' is in Fortran order; save it in C order (np.ascontiguousarray)", path);
  if (!std::regex_search(header, m, std::regex(R"('shape'\s*:\s*\(([^)]*)\))")))
    fail("load_npy: '{}' has no shape in its header", path);
  Shape shape;
  const std::string dims = m[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    const std::string digits = it->str();
    std::int64_t d = 0;
    const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
    if (ec != std::errc() || ptr != digits.data() + digits.size())
      fail("load_npy: '{}' has a dimension {} out of range in its shape ({})", path, digits, dims);
    shape.push_back(d);
  }
  // The file must hold the data before it is allocated: a corrupt shape must not ask for terabytes.
  const std::int64_t bytes = checked_numel(shape, "load_npy", size_of(dtype)) * static_cast<std::int64_t>(size_of(dtype));
  const std::streamoff data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff available = in.tellg() - data_start;
  in.seekg(data_start);
  if (available < bytes)
    fail("load_npy: '{}' holds {} bytes of data, fewer than its shape {} needs ({})", path, available, to_string(shape),
         bytes);
  Tensor t = Tensor::empty(shape, dtype);
  if (!in.read(static_cast<char*>(const_cast<void*>(t.raw_data())), static_cast<std::streamsize>(bytes)))
    fail("load_npy: reading '{}' failed", path);
  return t;
}

void save_npy(const std::string& path, const Tensor& t) {
  Shape shape = t.shape();
  if (t.is_batched()) shape.insert(shape.begin(), t.batch_size());
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  if (shape.size() > 1) dims.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   t.dtype() == DType::f64 ? "<f8" : "<f4", dims);
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
  if (t.dtype() == DType::f64) {
    const std::vector<double> v = t.to_vector<double>();
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  } else {
    const std::vector<float> v = t.to_vector<float>();
    out.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  }
  if (!out) fail("save_npy: writing '{}' failed", path);
}

}  // namespace vt
