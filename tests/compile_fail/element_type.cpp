// Reads a tensor's elements as VTAPE_ELEMENT. Built with std::int32_t (it must compile: this
// keeps the check below honest) and, by the ctest element_type_is_checked_at_compile_time, with
// short, which must fail to compile with vtape's static_assert message, not link and fail later.
#include <cstdint>
#include <vtape/core/tensor.hpp>

int main() {
  const vt::Tensor t = vt::Tensor::from_ints({1, 2}, {2});
  return static_cast<int>(t.to_vector<VTAPE_ELEMENT>().size() + t.item<VTAPE_ELEMENT>() * 0) - 2;
}
