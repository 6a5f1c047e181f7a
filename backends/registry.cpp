#include <charconv>
#include <map>

#include "../core/error.hpp"
#include "backend.hpp"
#include "cpu/cpu_backend.hpp"

namespace vt {

#ifdef VTAPE_WITH_CUDA
namespace cuda {
Backend& backend(int index);  // backends/cuda: raises when the device is not usable
int device_count();           // never raises
}  // namespace cuda
#endif

namespace {
std::map<std::pair<DeviceKind, int>, Backend*>& registered() {
  static auto* map = new std::map<std::pair<DeviceKind, int>, Backend*>;
  return *map;
}
}  // namespace

bool built_with_cuda() {
#ifdef VTAPE_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() {
#ifdef VTAPE_WITH_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
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

void register_backend(Device device, Backend* backend) {
  if (backend) {
    registered()[{device.kind, device.index}] = backend;
  } else {
    registered().erase({device.kind, device.index});
  }
}

Backend& backend_for(Device device) {
  if (!registered().empty())
    if (auto it = registered().find({device.kind, device.index}); it != registered().end()) return *it->second;
  if (device.kind == DeviceKind::cpu) {
    static auto* cpu = new cpu::CpuBackend;  // never destroyed: tensors may outlive static destruction
    return *cpu;
  }
  if (device.index < 0) fail("{} is not a device: negative index", to_string(device));
#ifdef VTAPE_WITH_CUDA
  return cuda::backend(device.index);
#else
  fail("{} is not available: vtape was built without CUDA (configure with -DVTAPE_CUDA=ON on a machine with the "
       "CUDA toolkit)",
       to_string(device));
#endif
}

}  // namespace vt
