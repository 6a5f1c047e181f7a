#pragma once
/// @file
/// Where a tensor's memory lives: the CPU or a CUDA device.
#include <string>
#include <string_view>

namespace vt {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  friend bool operator==(const Device&, const Device&) = default;
};
std::string to_string(Device d);  ///< "cpu", "cuda:0"
/// "cpu", "cuda" (= cuda:0) or "cuda:N"; raises vt::Error on anything else.
Device parse_device(std::string_view text);

}  // namespace vt
