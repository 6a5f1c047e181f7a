#include "backend.hpp"

#include <vector>

namespace vt {

void copy_bytes(Device to, void* dst, Device from, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
  if (from.kind == DeviceKind::cpu) {
    backend_for(to).from_host(dst, src, bytes);  // the CPU's from_host is a memcpy
  } else if (to.kind == DeviceKind::cpu) {
    backend_for(from).to_host(dst, src, bytes);
  } else {
    std::vector<char> host(bytes);
    backend_for(from).to_host(host.data(), src, bytes);
    backend_for(to).from_host(dst, host.data(), bytes);
  }
}

}  // namespace vt
