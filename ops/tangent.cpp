// Shared tangent rules (tangent.hpp).
#include "tangent.hpp"

#include "creation.hpp"
#include "elementwise.hpp"
#include "layout.hpp"

namespace vt {

Tensor linear_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  std::vector<Tensor> in = node.inputs;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (tangents[i].defined()) in[i] = tangents[i];
    else if (is_floating(in[i].dtype())) in[i] = zeros(in[i].shape(), in[i].dtype(), in[i].device());
  }
  return apply(*node.op, std::move(in), node.attrs);
}

Tensor self_adjoint_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents) {
  const AdjointContext context{.needs = {true}, .differentiated = true, .sums_over_batch = false};
  return node.op->adjoint(node, out, tangents[0], context)[0];
}

Tensor bilinear_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  const Tensor& a = node.inputs[0];
  const Tensor& b = node.inputs[1];
  return add_tangents(tangents[0].defined() ? apply(*node.op, {tangents[0], b}, node.attrs) : Tensor(),
                      tangents[1].defined() ? apply(*node.op, {a, tangents[1]}, node.attrs) : Tensor());
}

Tensor add_tangents(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return add(a, b);
}

Tensor symmetric_part(const Tensor& x) { return (x + swapaxes(x, -1, -2)) * 0.5; }

}  // namespace vt
