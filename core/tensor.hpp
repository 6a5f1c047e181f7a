#pragma once
/// @file
/// Tensor: an immutable, reference-counted value with a dtype, a device, a shape and shared
/// storage. Ops return new tensors and never write into their inputs, which is what makes
/// recording them on a tape (and tracing them for jit) safe.
///
/// Batch: a tensor is either unbatched or batched. A batched tensor stores B examples of its
/// per-example shape back to back, [B, ...shape()], and ops apply to every example at once.
/// Code inside `vmap` sees only the per-example shape; B itself never enters a traced graph.
#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backend.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "print.hpp"
#include "shape.hpp"
#include "view.hpp"

// Eigen is not included here: it costs most of a translation unit's parsing, and only the Eigen
// interop needs it (core/tensor_eigen.hpp, which vtape.hpp includes).
namespace Eigen {
template <typename Derived>
class MatrixBase;
}

namespace vt {

struct Node;

/// A block of device memory, freed when the last tensor viewing it goes away. `owner`, when set,
/// keeps borrowed memory alive instead (from_blob).
struct Storage {
  Device device;
  void* data = nullptr;
  std::size_t bytes = 0;
  std::shared_ptr<void> owner;
  bool owned = true;  ///< false for borrowed memory
  Storage(Device device, std::size_t bytes);
  Storage(Device device, void* data, std::size_t bytes, std::shared_ptr<void> owner);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  ~Storage();
};

struct TensorImpl {
  DType dtype = DType::f64;
  Shape shape;  ///< per example
  bool batched = false;
  std::int64_t batch = 0;  ///< B of a concrete batched tensor
  Device device;
  std::shared_ptr<Storage> storage;  ///< null for a symbolic (traced) tensor
  std::int64_t offset = 0;           ///< in elements; the data is contiguous from here
  std::shared_ptr<Node> node;        ///< the op that made it, when recorded
  bool tracked = false;              ///< a gradient may flow through it
  /// When tracked: the oldest transform (its id, autodiff/grad.hpp's TransformScope) whose variables it depends on.
  /// A transform whose result depends on an older one's variables is itself differentiated by that one.
  std::uint64_t tracked_since = 0;
  /// Made while jit traces from constants only: recorded for the plan (which computes it on its
  /// first run), not computed. Its batch size is known; reading its values computes it then (once).
  bool deferred = false;
  /// A cotangent that stands for none (autodiff/grad.hpp's no_cotangent): zeros that a backward pass skips, so that
  /// nothing downstream meets 0 x inf. Set only on tensors made for that.
  bool no_cotangent = false;

  TensorImpl() = default;
  TensorImpl(const TensorImpl&) = default;
  TensorImpl& operator=(const TensorImpl&) = default;
  /// Frees a chain of recorded ops (each node holding its inputs, and they theirs) without recursing as deep as it.
  ~TensorImpl();
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (float64 on the CPU unless a dtype or device is given). from_vector and scalar
  // convert their doubles to an integer dtype as astype does (core/dtype.hpp: truncation).
  static Tensor empty(const Shape& shape, DType dtype = DType::f64, Device device = {});
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape, DType dtype = DType::f64,
                            Device device = {});
  static Tensor scalar(double value, DType dtype = DType::f64, Device device = {});
  /// An integer tensor (int64 by default, or int32), exact for every int64 value. Raises for a
  /// floating dtype (use from_vector) and, for int32, for a value that does not fit it.
  static Tensor from_ints(const std::vector<std::int64_t>& values, const Shape& shape, DType dtype = DType::i64,
                          Device device = {});
  /// Copies any Eigen matrix or vector (column vectors become rank 1). Defined in
  /// core/tensor_eigen.hpp (included by vtape.hpp).
  template <class Derived>
  static Tensor from_eigen(const Eigen::MatrixBase<Derived>& m);
  /// Wraps existing contiguous row-major memory without copying; `owner` keeps it alive (may be null
  /// when the caller guarantees the memory outlives every tensor made from it).
  static Tensor from_blob(void* data, const Shape& shape, DType dtype, std::shared_ptr<void> owner = nullptr);

  // ---- inspection
  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  std::int64_t shape(std::int64_t axis) const;
  std::size_t ndim() const { return impl().shape.size(); }
  std::int64_t numel() const { return vt::numel(impl().shape); }
  Device device() const { return impl().device; }
  bool is_batched() const { return impl().batched; }
  std::int64_t batch_size() const;  ///< B of a batched tensor
  /// No values yet: a traced tensor, or one deferred by jit (TensorImpl::deferred), which a read computes.
  bool is_symbolic() const { return impl().storage == nullptr; }

  // ---- element access (copies to the host from any device; for tests and small results).
  /// T is float, double, std::int32_t, std::int64_t or bool (any other type is a compile error); values
  /// are converted from the tensor's dtype as astype converts them (core/dtype.hpp: float to integer
  /// truncates toward zero, NaN gives 0, out of range saturates).
  template <class T = double>
  T item() const;  ///< a one-element tensor
  template <class T = double>
  T at(std::initializer_list<std::int64_t> index) const;
  template <class T = double>
  std::vector<T> to_vector() const;  ///< every element, row-major, batch first
  /// A row-major Eigen view of a CPU tensor of rank <= 2 without copying (rank 1 gives a column):
  /// an `Eigen::Map<const Eigen::Matrix<T, Dynamic, Dynamic, RowMajor>>`. Defined in
  /// core/tensor_eigen.hpp (included by vtape.hpp).
  template <class T>
  auto as_eigen() const;

  /// Raw pointer to the first element (contiguous row-major) in the memory of the tensor's device,
  /// for backends and interop.
  const void* raw_data() const;
  template <class T>
  const T* data() const;

  // ---- convenience forms of common ops (defined with their ops, in ops/)
  Tensor t() const;  ///< swaps the last two axes (the matrix transpose)
  Tensor operator-() const;
  Tensor astype(DType dtype) const;
  Tensor reshape(const Shape& shape) const;
  Tensor to(Device device) const;  ///< vt::to_device

  TensorImpl& impl() const {
    if (!impl_) undefined();  // inline: every accessor above reads through it, once per op and more
    return *impl_;
  }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  [[noreturn]] static void undefined();  ///< raises: the use of an undefined (default-constructed) tensor
  /// The untyped halves of the element access templates: every stored element (batch included),
  /// one element, as `as` into host memory at `out`.
  std::int64_t stored_numel() const;
  void read_all(DType as, void* out) const;
  void read_one(DType as, void* out) const;  ///< raises unless the tensor has one element
  void read_at(DType as, std::initializer_list<std::int64_t> index, void* out) const;

  std::shared_ptr<TensorImpl> impl_;
};

namespace detail {
// Constructors for op implementations (ops/creation), checked in the name of `op`: the error names
// it and the shape. Nothing is recorded: the results are fresh constants.
// A tensor of uninitialised memory.
Tensor allocate(const Shape& shape, DType dtype, Device device, std::string_view op);
// A tensor with every element `value`, filled by the device's backend.
Tensor filled(const Shape& shape, double value, DType dtype, Device device, std::string_view op);
// A copy of the unbatched CPU tensor `host` on `device`, made by that device's backend (`host`
// itself when `device` is the CPU).
Tensor uploaded(const Tensor& host, Device device);
}  // namespace detail

/// The physical view of a tensor's data as [B, ...shape] when batched, else shape.
View view_of(const Tensor& t);

namespace detail {
// Computes a deferred tensor's values now (core/apply.cpp); nothing for any other tensor.
void materialize(const Tensor& t);
// "a batch of B examples of shape S", for messages about batched tensors.
std::string batch_description(const Tensor& t);
// The elements of `v` (on `device`) as `as`, row-major into host memory at `out`.
void read_to_host(Device device, const View& v, DType as, void* out);
}  // namespace detail

// ------------------------------------------------------------------ templates
namespace detail {
template <class T>
constexpr void check_element_type() {
  static_assert(is_element_type<T>,
                "vtape: item<T>, at<T> and to_vector<T> read T = float, double, std::int32_t, std::int64_t or bool; "
                "read one of those and convert");
}
}  // namespace detail

template <class T>
T Tensor::item() const {
  detail::check_element_type<T>();
  T value;
  read_one(dtype_of<T>(), &value);
  return value;
}

template <class T>
T Tensor::at(std::initializer_list<std::int64_t> index) const {
  detail::check_element_type<T>();
  T value;
  read_at(dtype_of<T>(), index, &value);
  return value;
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  detail::check_element_type<T>();
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> has no data(): bytes first
    std::vector<char> bytes(static_cast<std::size_t>(stored_numel()));
    read_all(DType::boolean, bytes.data());
    return std::vector<bool>(bytes.begin(), bytes.end());
  } else {
    std::vector<T> out(static_cast<std::size_t>(stored_numel()));
    read_all(dtype_of<T>(), out.data());
    return out;
  }
}

template <class T>
const T* Tensor::data() const {
  if (dtype_of<T>() != dtype()) fail("data: tensor is {}, not {}", name_of(dtype()), name_of(dtype_of<T>()));
  return static_cast<const T*>(raw_data());
}

}  // namespace vt

// Tensors format as numpy prints arrays (core/print.hpp); `{:.N}` prints N digits after the point
// at most, instead of vt::print_options().precision. (Left out of the API reference: doxygen
// cannot place a specialization of fmt's template.)
/// @cond
template <>
struct fmt::formatter<vt::Tensor> {
  int precision = -1;  // -1: the print options' precision

  constexpr auto parse(format_parse_context& ctx) {
    auto it = ctx.begin();
    if (it != ctx.end() && *it == '.') {
      precision = 0;
      bool digits = false;
      for (++it; it != ctx.end() && *it >= '0' && *it <= '9'; ++it) {
        precision = precision * 10 + (*it - '0');
        digits = true;
        if (precision > 64) throw format_error("vt::Tensor format: the precision {:.N} takes N up to 64");
      }
      if (!digits) throw format_error("vt::Tensor format: expected digits after '.', as in {:.4}");
    }
    if (it != ctx.end() && *it != '}') throw format_error("vt::Tensor format: the only spec is a precision, {:.N}");
    return it;
  }
  format_context::iterator format(const vt::Tensor& t, format_context& ctx) const;
};
/// @endcond
