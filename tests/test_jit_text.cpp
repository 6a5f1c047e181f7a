// jit's plan text and verifier (autodiff/jit/text.cpp, verify.cpp): a plan written by hand is read, a pass runs on it,
// and the text it leaves is compared with the text expected; each pass refuses a plan holding its pattern with one
// precondition broken; the verifier catches what a broken pass would leave; real plans read back to the same text,
// run, and every pass re-run on the text dumped before it gives the text dumped after it.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../autodiff/jit/plan.hpp"
#include "gradcheck.hpp"

using namespace vt;
using vt::testing::error_of;

namespace {

// The step, fold and result lines of a plan's text, without the annotations of a pass (" by=...").
std::vector<std::string> steps_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("step") && !line.starts_with("fold") && !line.starts_with("results")) continue;
    if (const std::size_t by = line.find(" by="); by != std::string::npos) line.erase(by);
    lines.push_back(line);
  }
  return lines;
}

// The plan text after running one pass on `text`.
std::string after(const std::string& pass, const std::string& text) {
  const std::shared_ptr<detail::Plan> plan = detail::parse_plan(text);
  detail::run_pass(*plan, pass);
  detail::verify_plan(*plan, pass);
  return detail::plan_text(*plan);
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("plan text: each pass on a plan written by hand, firing and refusing", "[jit][passes][text]") {
  SECTION("fold_transposes_into_matmuls: a matrix transpose a matmul reads becomes its GEMM flag") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[5,3]
%1 = input 1 : float64[5,4]
step 0: %2 = transpose(%0) perm=[1,0] : float64[3,5]
step 1: %3 = matmul(%2, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[3,4]
results %3
)";
    CHECK(steps_of(after("fold_transposes_into_matmuls", fires)) ==
          Lines{"step 0: %2 = transpose(%0) perm=[1,0] : float64[3,5]",
                "step 1: %3 = matmul(%0, %1) transpose_a=1 transpose_b=0 symmetric=0 lower_only=0 : float64[3,4]",
                "results %3"});
    // The same transpose read by an elementwise step: no flag can take it (and %0 is not symmetric: not square).
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[5,3]
%1 = input 1 : float64[3,5]
step 0: %2 = transpose(%0) perm=[1,0] : float64[3,5]
step 1: %3 = mul(%2, %1) : float64[3,5]
results %3
)";
    CHECK(steps_of(after("fold_transposes_into_matmuls", refuses)) == steps_of(refuses));
  }
  SECTION("mark_symmetric_products: X X^T is marked, X Z^T is not") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[4,3]
step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=0 lower_only=0 : float64[4,4]
results %1
)";
    CHECK(steps_of(after("mark_symmetric_products", fires)) ==
          Lines{"step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[4,4]",
                "results %1"});
    // X X, square: not X read with the opposite flag.
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[4,4]
step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[4,4]
results %1
)";
    CHECK(steps_of(after("mark_symmetric_products", refuses)) == steps_of(refuses));
  }
  SECTION("mark_lower_only_outputs: a symmetric product only a factorization reads; not when it is a result") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[4,3]
step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[4,4]
step 1: %2 = cho_factor(%1) lower_only=0 : float64[4,4]
step 2: %3 = logdet(%1, %2) : float64[]
results %3
)";
    CHECK(steps_of(after("mark_lower_only_outputs", fires)) ==
          Lines{"step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=1 : float64[4,4]",
                "step 1: %2 = cho_factor(%1) lower_only=1 : float64[4,4]", "step 2: %3 = logdet(%1, %2) : float64[]",
                "results %3"});
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[4,3]
step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[4,4]
step 1: %2 = cho_factor(%1) lower_only=0 : float64[4,4]
step 2: %3 = logdet(%1, %2) : float64[]
results %3, %1
)";
    CHECK(steps_of(after("mark_lower_only_outputs", refuses)) ==
          Lines{"step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[4,4]",
                "step 1: %2 = cho_factor(%1) lower_only=1 : float64[4,4]", "step 2: %3 = logdet(%1, %2) : float64[]",
                "results %3, %1"});
  }
  SECTION("fold_diagonal_adds: a captured diagonal added to a product; not a matrix with one entry off it") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[2,2]
%1 = constant : float64[2,2] = [3, 0, 0, 3]
step 0: %2 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=0 lower_only=0 : float64[2,2]
step 1: %3 = add(%2, %1) : float64[2,2]
results %3
)";
    // The add reads the product's operands and the diagonal; the product's step, read by nothing now, is left to
    // eliminate_dead_steps.
    CHECK(steps_of(after("fold_diagonal_adds", fires)) ==
          Lines{"step 0: %2 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=0 lower_only=0 : float64[2,2]",
                "step 1: %3 = matmul_add_diagonal(%0, %0, %1) transpose_a=0 transpose_b=1 symmetric=0 lower_only=0 : "
                "float64[2,2]",
                "results %3"});
    std::string refuses = fires;
    refuses.replace(refuses.find("[3, 0, 0, 3]"), 12, "[3, 0, 1, 3]");
    CHECK(steps_of(after("fold_diagonal_adds", refuses)) == steps_of(refuses));
  }
  SECTION("fold_constants: a step on constants only moves to the folds; one that reads an argument stays") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[B,3]
%1 = constant : float64[] = [-0.5]
step 0: %2 = exp(%1) : float64[]
step 1: %3 = mul(%0, %2) : float64[B,3]
results %3
)";
    CHECK(steps_of(after("fold_constants", fires)) ==
          Lines{"fold 0: %2 = exp(%1) : float64[]", "step 0: %3 = mul(%0, %2) : float64[B,3]", "results %3"});
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[B,3]
%1 = constant : float64[] = [-0.5]
step 0: %2 = exp(%0) : float64[B,3]
step 1: %3 = mul(%2, %1) : float64[B,3]
results %3
)";
    CHECK(steps_of(after("fold_constants", refuses)) == steps_of(refuses));
  }
  SECTION("merge_common_steps and eliminate_dead_steps: a repeated step read as the first, then dropped") {
    const std::string text = R"(plan device=cpu
%0 = input 0 : float64[3]
step 0: %1 = exp(%0) : float64[3]
step 1: %2 = exp(%0) : float64[3]
step 2: %3 = mul(%1, %2) : float64[3]
results %3
)";
    const std::string merged = after("merge_common_steps", text);
    CHECK(steps_of(merged) == Lines{"step 0: %1 = exp(%0) : float64[3]", "step 1: %2 = exp(%0) : float64[3]",
                                    "step 2: %3 = mul(%1, %1) : float64[3]", "results %3"});
    CHECK(steps_of(after("eliminate_dead_steps", merged)) ==
          Lines{"step 0: %1 = exp(%0) : float64[3]", "step 1: %3 = mul(%1, %1) : float64[3]", "results %3"});
    // The second exp is a result: merged readers, but a result keeps its step.
    std::string result = text;
    result.replace(result.find("results %3"), 10, "results %3, %2");
    CHECK(steps_of(after("eliminate_dead_steps", after("merge_common_steps", result))).size() == 4);
  }
  SECTION("order_for_chunks: the batch's sum after the steps it sums; refused when a batched step reads it") {
    const std::string fires = R"(plan device=cpu chunk_cache_bytes=262144
%0 = input 0 : float64[B,3]
%1 = input 1 : float64[3]
step 0: %2 = exp(%0) : float64[B,3]
step 1: %3 = batch_sum(%2) : float64[3]
step 2: %4 = exp(%1) : float64[3]
step 3: %5 = mul(%3, %4) : float64[3]
results %5
)";
    const std::string ordered = after("order_for_chunks", fires);
    CHECK(ordered.starts_with("plan device=cpu chunk_cache_bytes=262144 chunkable=1 chunk_begin=1 chunk_end=3\n"));
    CHECK(steps_of(ordered) == Lines{"step 0: %4 = exp(%1) : float64[3]", "step 1: %2 = exp(%0) : float64[B,3]",
                                     "step 2: %3 = batch_sum(%2) : float64[3]", "step 3: %5 = mul(%3, %4) : float64[3]",
                                     "results %5"});
    const std::string refuses = R"(plan device=cpu chunk_cache_bytes=262144
%0 = input 0 : float64[B,3]
step 0: %1 = batch_sum(%0) : float64[3]
step 1: %2 = mul(%0, %1) : float64[B,3]
results %2
)";
    const std::string kept = after("order_for_chunks", refuses);
    CHECK(kept.find("chunkable") == std::string::npos);
    CHECK(steps_of(kept) == steps_of(refuses));
  }
}

TEST_CASE("plan text: the verifier names what a broken pass would leave", "[jit][passes][text]") {
  // What the verifier raises (std::logic_error: a broken pass is the library's bug), or "".
  const auto verifying = [](const std::string& text) -> std::string {
    const std::shared_ptr<detail::Plan> plan = detail::parse_plan(text);
    try {
      detail::verify_plan(*plan, "a_test");
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "";
  };
  const std::string good = R"(plan device=cpu
%0 = input 0 : float64[4,3]
step 0: %1 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[4,4]
step 1: %2 = cho_factor(%1) lower_only=1 : float64[4,4]
step 2: %3 = logdet(%1, %2) : float64[]
results %3
)";
  CHECK(verifying(good).empty());
  const auto broken = [&](const std::string& from, const std::string& to) {
    std::string text = good;
    REQUIRE(text.find(from) != std::string::npos);
    return verifying(text.replace(text.find(from), from.size(), to));
  };
  // A step read before it runs: the steps swapped.
  CHECK(broken("step 1: %2 = cho_factor(%1) lower_only=1 : float64[4,4]\nstep 2: %3 = logdet(%1, %2) : float64[]",
               "step 1: %3 = logdet(%1, %2) : float64[]\nstep 2: %2 = cho_factor(%1) lower_only=1 : float64[4,4]")
            .find("the plan is wrong after the pass a_test: step 1 reads %2 before anything makes it") !=
        std::string::npos);
  // A type the shape rule does not give.
  CHECK(broken("logdet(%1, %2) : float64[]", "logdet(%1, %2) : float64[4]")
            .find("step 2 (logdet) makes %3 of type float64[4], where its shape rule gives float64[]") !=
        std::string::npos);
  // An upper triangle left unwritten that a reader reads.
  CHECK(
      broken("results %3", "results %3, %2")
          .find("step 1 (cho_factor) leaves %2's upper triangle unwritten, but a reader or a result reads it whole") !=
      std::string::npos);
  // A product whose shape rule refuses it; one marked symmetric that cannot be.
  CHECK(broken("transpose_b=1 symmetric=1", "transpose_b=0 symmetric=1")
            .find("step 0 (matmul) is refused by its shape rule: matmul:") != std::string::npos);
  CHECK(verifying("plan device=cpu\n%0 = input 0 : float64[4,3]\n%1 = input 1 : float64[3,2]\n"
                  "step 0: %2 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=1 lower_only=0 : float64[4,2]\n"
                  "results %2\n")
            .find("step 0 is marked symmetric, but multiplies [4,3] by [3,2] into [4,2]") != std::string::npos);
  // Two buffers alive at once in the same bytes.
  const std::string memory = R"(plan device=cpu arena_fixed=128 memory_planned=1
%0 = input 0 : float64[3] root=%0
step 0: %1 = exp(%0) : float64[3] root=%1 offset=0
step 1: %2 = sin(%0) : float64[3] root=%2 offset=64
step 2: %3 = mul(%1, %2) : float64[3] root=%3 output_buffer
results %3
)";
  CHECK(verifying(memory).empty());
  std::string overlapping = memory;
  overlapping.replace(overlapping.find("offset=64"), 9, "offset=0");
  CHECK(verifying(overlapping).find("%1 and %2 share bytes of an arena ([0, 64) and [0, 64))") != std::string::npos);
  std::string outside = memory;
  outside.replace(outside.find("arena_fixed=128"), 15, "arena_fixed=100");
  CHECK(verifying(outside).find("%2 lies at [64, 128), outside its arena of 100 bytes") != std::string::npos);
}

TEST_CASE("plan text: what cannot be read is refused, naming the line", "[jit][passes][text]") {
  const auto reading = [](const std::string& text) { return error_of([&] { detail::parse_plan(text); }); };
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3]\nstep 0: %1 = no_such_op(%0) : float64[3]\n")
            .find("line 3 (\"step 0: %1 = no_such_op(%0) : float64[3]\"): no op is registered as \"no_such_op\"") !=
        std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3]\nstep 0: %1 = sum(%0) keepdims=0 : float64[]\n")
            .find("sum needs its attribute axes") != std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3]\nstep 0: %1 = exp(%0) axis=1 : float64[3]\n")
            .find("exp has no attribute axis") != std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = constant : float64[2] = [1, 2, 3]\n").find("%0 has 3 elements, not 2") !=
        std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = constant : float64[100] = <elided>\n")
            .find("%0's data is elided; pass the tensor to parse_plan") != std::string::npos);
  CHECK(
      reading("plan device=cpu\n%0 = input 0 : float64[3]\n%0 = input 1 : float64[3]\n").find("%0 is defined twice") !=
      std::string::npos);
  CHECK(reading("plan device=cpu\n%1 = input 0 : float64[3]\nresults %1\n")
            .find("%0 is read or counted but never defined") != std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3\n").find("unbalanced brackets") != std::string::npos);
  // An elided constant's tensor, given by its index, of its type only.
  const Tensor c = randn({100}, 1);
  CHECK(detail::parse_plan("plan device=cpu\n%0 = constant : float64[100] = <elided>\n", {{0, c}})
            ->values[0]
            .constant.impl_ptr() == c.impl_ptr());
  CHECK(error_of([&] {
          detail::parse_plan("plan device=cpu\n%0 = constant : float64[99] = <elided>\n", {{0, c}});
        }).find("the tensor given for %0 is float64[100], not float64[99]") != std::string::npos);
}
