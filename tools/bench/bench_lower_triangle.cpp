// Where computing a fused run over one triangle pays (min_lower_triangle_order, autodiff/jit/plan.hpp): a kernel
// matrix K = (a X)(a X)^T per example, symmetric, and the elementwise run exp(b K) c + a K K with the sum of its
// square, jit(vmap(value_and_grad)) at B = 8, for orders 64 to 512. Prints each order's median call and how many of the
// plan's fused steps run by the lower triangle. The comparison of docs/performance.md ("Which runs go by the lower
// triangle") runs it against two builds of the library, the constant set below every order and above every order.
//
//   OMP_NUM_THREADS=1 taskset -c 0 build/tools/bench_lower_triangle [--reps 41]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

int main(int argc, char** argv) {
  using namespace vt;
  int reps = 41;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--reps") reps = std::max(1, std::stoi(argv[i + 1]));
  for (std::int64_t n : {64, 96, 128, 192, 256, 384, 512}) {
    const Tensor X = randn({n, 3}, 7);
    auto f = [&](const Tensor& th) {
      const Tensor a = slice(th, 0, 0, 1), b = slice(th, 0, 1, 2), c = slice(th, 0, 2, 3);
      const Tensor K = matmul(X * a, X * a, false, true);
      const Tensor E = exp(K * b) * c + K * K * a;
      return reshape(sum(E * E), {});
    };
    const Tensor thetas = as_batch(rand({8, 3}, 3) * 0.1 + 0.05);
    auto step = jit(vmap(value_and_grad(f)));
    (void)step(thetas);
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      const auto t = std::chrono::steady_clock::now();
      (void)step(thetas);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
    }
    std::sort(ms.begin(), ms.end());
    const PlanSummary s = step.compile(thetas);
    fmt::print("n {:4}: {:.3f} ms  fused {} (by the lower triangle {})\n", n, ms[ms.size() / 2], s.fused,
               s.fused_lower);
  }
}
