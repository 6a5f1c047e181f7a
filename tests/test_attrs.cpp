// Typed op attributes: pack_attrs / unpack_attrs (core/graph.hpp) are the one place an op's named
// fields become the flat Attrs that jit compares and hashes, and back.
#include "gradcheck.hpp"

using namespace vt;

namespace {
struct Everything {
  std::int64_t count;
  bool flag;
  DType dtype;
  double scale;
  Shape axes;
  Device device;
  Shape more;
  std::vector<std::int64_t> list;  // a list of axes as ops hold them (ops/reduce.hpp's Axes)
  auto fields() { return std::tie(count, flag, dtype, scale, axes, device, more, list); }
};
}  // namespace

TEST_CASE("typed attributes round-trip through their packed form", "[attrs]") {
  const Everything in{-7, true, DType::f32, 0.25, {3, -1, 0}, Device::cuda(2), {}, {4, 1, 2, 3, 4, 5, 6, 7}};
  const Attrs packed = pack_attrs(in);
  const Everything out = unpack_attrs<Everything>(packed);
  CHECK(out.count == -7);
  CHECK(out.flag);
  CHECK(out.dtype == DType::f32);
  CHECK(out.scale == 0.25);
  CHECK(out.axes == Shape{3, -1, 0});
  CHECK(out.device == Device::cuda(2));
  CHECK(out.more.empty());
  CHECK(out.list == std::vector<std::int64_t>{4, 1, 2, 3, 4, 5, 6, 7});
  CHECK(packed.reals == std::vector<double>{0.25});
}

TEST_CASE("different attributes never pack alike", "[attrs]") {
  // jit merges steps whose packed attributes are equal: shapes of other lengths must not collide.
  const auto pack = [](Shape a, Shape b) { return pack_attrs(Everything{1, false, DType::f64, 1.0, a, {}, b, {}}); };
  CHECK(pack({1, 2}, {3}) != pack({1}, {2, 3}));
  CHECK(pack({}, {1}) != pack({1}, {}));
  CHECK(pack({1, 2}, {3}) == pack({1, 2}, {3}));
  CHECK(pack_attrs(Everything{1, false, DType::f64, 1.0, {}, Device::cuda(0), {}, {}}) !=
        pack_attrs(Everything{1, false, DType::f64, 1.0, {}, Device::cpu(), {}, {}}));
}
