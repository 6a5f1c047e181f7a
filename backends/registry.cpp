#include <array>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "../core/error.hpp"
#include "../core/backend.hpp"
#include "cpu/cpu_backend.hpp"

#ifdef VTAPE_WITH_CUDA
#include <dlfcn.h>
#endif

namespace vt {

namespace {

std::map<std::pair<DeviceKind, int>, Backend*>& registered() {
  static auto* map = new std::map<std::pair<DeviceKind, int>, Backend*>;
  return *map;
}

#ifdef VTAPE_WITH_CUDA
// The CUDA backend lives in a module loaded on first use (see backends/cuda/cuda_backend.hpp).
// Looked for at $VTAPE_CUDA_MODULE, then where this build put it, where `cmake --install` puts it,
// and finally by name through the dynamic loader's search path.
struct CudaModule {
  int (*device_count)() = nullptr;
  Backend* (*backend)(int, char*, std::size_t) = nullptr;
  std::string error;  // why it could not be loaded
};

const CudaModule& cuda_module() {
  // Never destroyed: device tensors in static storage are freed through it at exit.
  static const CudaModule& module = *new CudaModule([] {
    CudaModule m;
    std::vector<std::string> paths;
    if (const char* env = std::getenv("VTAPE_CUDA_MODULE"); env && *env) paths.emplace_back(env);
    paths.emplace_back(VTAPE_CUDA_MODULE_BUILD);
    paths.emplace_back(VTAPE_CUDA_MODULE_INSTALL);
    paths.emplace_back(VTAPE_CUDA_MODULE_NAME);
    for (const std::string& path : paths) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!handle) {
        const char* why = dlerror();
        m.error += "\n  " + (why ? std::string(why) : path + ": cannot be loaded");  // dlerror names the path
        continue;
      }
      m.device_count = reinterpret_cast<int (*)()>(dlsym(handle, "vtape_cuda_device_count"));
      m.backend = reinterpret_cast<Backend* (*)(int, char*, std::size_t)>(dlsym(handle, "vtape_cuda_backend"));
      if (m.device_count && m.backend) {
        m.error.clear();
        return m;
      }
      m.error += fmt::format("\n  {}: not a vtape CUDA module", path);
      m.device_count = nullptr;
      m.backend = nullptr;
    }
    m.error = "vtape's CUDA module could not be loaded (set VTAPE_CUDA_MODULE to libvtape_cuda.so's path):" + m.error;
    return m;
  }());
  return module;
}
#endif

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
  const CudaModule& m = cuda_module();
  return m.device_count ? m.device_count() : 0;
#else
  return 0;
#endif
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
  // Every op and every allocation asks: the first devices' backends are kept here, lock-free.
  static std::array<std::atomic<Backend*>, 16> known{};
  const auto slot = static_cast<std::size_t>(device.index);
  if (slot < known.size())
    if (Backend* b = known[slot].load(std::memory_order_acquire)) return *b;
  const CudaModule& m = cuda_module();
  if (!m.backend) fail("{} is not available: {}", to_string(device), m.error);
  char message[512] = {};
  Backend* b = m.backend(device.index, message, sizeof message);
  if (!b) throw Error(message);
  if (slot < known.size()) known[slot].store(b, std::memory_order_release);
  return *b;
#else
  fail(
      "{} is not available: vtape was built without CUDA (configure with -DVTAPE_CUDA=ON on a machine with the "
      "CUDA toolkit)",
      to_string(device));
#endif
}

}  // namespace vt
