#include "device.hpp"

#include <charconv>

#include "error.hpp"

namespace vt {

std::string to_string(Device d) {
  return d.kind == DeviceKind::cpu ? std::string("cpu") : fmt::format("cuda:{}", d.index);
}

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.starts_with("cuda:")) {
    const std::string_view digits = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && index >= 0 && !digits.empty())
      return Device::cuda(index);
  }
  fail("parse_device: '{}' is not a device (expected cpu, cuda or cuda:N)", text);
}

}  // namespace vt
