#pragma once
// Elementwise maps with numpy broadcasting. A C++ scalar operand takes the tensor's dtype.
#include "../core/tensor.hpp"

namespace vt {

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor abs(const Tensor& x);   // gradient sign(x), 0 at 0
Tensor sign(const Tensor& x);  // not differentiable (gradient 0)

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);      // d/db uses log(a): defined for a > 0 (0 where a == 0)
Tensor maximum(const Tensor& a, const Tensor& b);  // ties split the gradient evenly
// Comparisons give 1 or 0 in the operands' dtype and stop gradients.
Tensor less(const Tensor& a, const Tensor& b);
Tensor greater(const Tensor& a, const Tensor& b);
Tensor equal(const Tensor& a, const Tensor& b);
// cond != 0 ? a : b, all three broadcast together; cond takes no gradient.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor astype(const Tensor& x, DType dtype);

Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor pow(const Tensor& a, double b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);

}  // namespace vt
