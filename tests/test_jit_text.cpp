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
#include "../ops/elementwise.hpp"
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

// The plan text after running passes (comma-separated, in order) on `text`, verified after each.
std::string after(const std::string& passes, const std::string& text) {
  const std::shared_ptr<detail::Plan> plan = detail::parse_plan(text);
  std::istringstream names(passes);
  for (std::string pass; std::getline(names, pass, ',');) {
    detail::run_pass(*plan, pass);
    detail::verify_plan(*plan, pass);
  }
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
  SECTION("merge_common_steps: a repeated step is read as the first; not one of other attributes") {
    const std::string text = R"(plan device=cpu
%0 = input 0 : float64[3]
step 0: %1 = exp(%0) : float64[3]
step 1: %2 = exp(%0) : float64[3]
step 2: %3 = mul(%1, %2) : float64[3]
results %3
)";
    CHECK(steps_of(after("merge_common_steps", text)) == Lines{"step 0: %1 = exp(%0) : float64[3]",
                                                               "step 1: %2 = exp(%0) : float64[3]",
                                                               "step 2: %3 = mul(%1, %1) : float64[3]", "results %3"});
    const std::string sums = R"(plan device=cpu
%0 = input 0 : float64[3,3]
step 0: %1 = sum(%0) keepdims=0 axes=[0] : float64[3]
step 1: %2 = sum(%0) keepdims=0 axes=[1] : float64[3]
step 2: %3 = mul(%1, %2) : float64[3]
results %3
)";
    CHECK(steps_of(after("merge_common_steps", sums)) == steps_of(sums));
  }
  SECTION("eliminate_dead_steps: a step nothing reads is dropped; not one that is a result") {
    const std::string text = R"(plan device=cpu
%0 = input 0 : float64[3]
step 0: %1 = exp(%0) : float64[3]
step 1: %2 = sin(%0) : float64[3]
step 2: %3 = mul(%1, %1) : float64[3]
results %3
)";
    CHECK(steps_of(after("eliminate_dead_steps", text)) ==
          Lines{"step 0: %1 = exp(%0) : float64[3]", "step 1: %3 = mul(%1, %1) : float64[3]", "results %3"});
    std::string result = text;
    result.replace(result.find("results %3"), 10, "results %3, %2");
    CHECK(steps_of(after("eliminate_dead_steps", result)) == steps_of(result));
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

TEST_CASE("plan text: the rewrites of products and sums, firing and refusing", "[jit][passes][text]") {
  SECTION("fold_broadcasts_into_elementwise: a product reads the broadcast's input; exp of it does not") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[8]
step 0: %1 = sum(%0) keepdims=0 axes=[0] : float64[]
step 1: %2 = reshape(%1) shape=[1] : float64[1]
step 2: %3 = broadcast_to(%2) shape=[8] : float64[8]
step 3: %4 = mul(%3, %0) : float64[8]
results %4
)";
    CHECK(steps_of(after("fold_broadcasts_into_elementwise", fires)).at(3) == "step 3: %4 = mul(%2, %0) : float64[8]");
    // exp's output has the broadcast's shape only through the broadcast: it must read it whole.
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[8]
step 0: %1 = sum(%0) keepdims=0 axes=[0] : float64[]
step 1: %2 = reshape(%1) shape=[1] : float64[1]
step 2: %3 = broadcast_to(%2) shape=[8] : float64[8]
step 3: %4 = exp(%3) : float64[8]
step 4: %5 = mul(%4, %0) : float64[8]
results %5
)";
    CHECK(steps_of(after("fold_broadcasts_into_elementwise", refuses)) == steps_of(refuses));
  }
  SECTION("take_indicator_products: x S for S of one 1 per row is a segment sum; a 2 in S keeps the product") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[B,4]
%1 = constant : float64[4,3] = [0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0]
step 0: %2 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[B,3]
results %2
)";
    const std::string fired = after("take_indicator_products", fires);
    CHECK(fired.find("%3 = constant : int64[4] = [2, 0, 2, 0]") != std::string::npos);
    CHECK(steps_of(fired) == Lines{"step 0: %2 = segment_sum(%0, %3) num_segments=3 : float64[B,3]", "results %2"});
    std::string refuses = fires;
    refuses.replace(refuses.find("[0, 0, 1, 1"), 11, "[0, 0, 2, 1");
    CHECK(steps_of(after("take_indicator_products", refuses)) == steps_of(refuses));
  }
  SECTION("reassociate_matmuls: (P Q) Y as P (Q Y) for a thin P; not where the given order is the cheaper") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[50,2]
%1 = input 1 : float64[2,50]
%2 = input 2 : float64[50,50]
step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[50,50]
step 1: %4 = matmul(%3, %2) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[50,50]
results %4
)";
    CHECK(steps_of(after("reassociate_matmuls", fires)) ==
          Lines{"step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[50,50]",
                "step 1: %5 = matmul(%1, %2) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[2,50]",
                "step 2: %4 = matmul(%0, %5) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[50,50]",
                "results %4"});
    // (Q P) Y with Q P of order 2: 2 * 50 * 2 + 2 * 2 * 2 flops against 50 * 2 * 2 + 2 * 50 * 2 the other way.
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[2,50]
%1 = input 1 : float64[50,2]
%2 = input 2 : float64[2,2]
step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[2,2]
step 1: %4 = matmul(%3, %2) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[2,2]
results %4
)";
    CHECK(steps_of(after("reassociate_matmuls", refuses)) == steps_of(refuses));
  }
  SECTION("scale_repeated_solves: A^-1 (q s) from A^-1 q; not for a vector s") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[3,3]
%1 = input 1 : float64[]
%2 = input 2 : float64[3]
step 0: %3 = cho_factor(%0) lower_only=0 : float64[3,3]
step 1: %4 = cho_solve(%0, %3, %2) : float64[3]
step 2: %5 = mul(%2, %1) : float64[3]
step 3: %6 = cho_solve(%0, %3, %5) : float64[3]
step 4: %7 = add(%4, %6) : float64[3]
results %7
)";
    const Lines fired = steps_of(after("scale_repeated_solves", fires));
    CHECK(fired.at(3) == "step 3: %6 = mul(%4, %1) : float64[3]");
    std::string refuses = fires;
    refuses.replace(refuses.find("%1 = input 1 : float64[]"), 24, "%1 = input 1 : float64[3]");
    CHECK(steps_of(after("scale_repeated_solves", refuses)) == steps_of(refuses));
  }
  SECTION("contract_low_rank_row_sums: sum_rows((U W) * C) as sum_rows(W * (U^T C)) for a rank below the rows") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[40,2]
%1 = input 1 : float64[2,7]
%2 = input 2 : float64[40,7]
step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[40,7]
step 1: %4 = mul(%3, %2) : float64[40,7]
step 2: %5 = sum(%4) keepdims=0 axes=[0] : float64[7]
results %5
)";
    CHECK(steps_of(after("contract_low_rank_row_sums", fires)) ==
          Lines{"step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[40,7]",
                "step 1: %6 = matmul(%0, %2) transpose_a=1 transpose_b=0 symmetric=0 lower_only=0 : float64[2,7]",
                "step 2: %7 = mul(%1, %6) : float64[2,7]", "step 3: %5 = sum(%7) keepdims=0 axes=[0] : float64[7]",
                "results %5"});
    // The same with 6 inner columns over 4 rows: U W is not of lower rank than its rows.
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[4,6]
%1 = input 1 : float64[6,7]
%2 = input 2 : float64[4,7]
step 0: %3 = matmul(%0, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[4,7]
step 1: %4 = mul(%3, %2) : float64[4,7]
step 2: %5 = sum(%4) keepdims=0 axes=[0] : float64[7]
results %5
)";
    CHECK(steps_of(after("contract_low_rank_row_sums", refuses)) == steps_of(refuses));
  }
  SECTION("move_scalings_out_of_symmetric_sums: sum(X c) as sum(X) c; not for a c of one entry per column") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[200,3]
%1 = input 1 : float64[]
step 0: %2 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[200,200]
step 1: %3 = mul(%2, %1) : float64[200,200]
step 2: %4 = sum(%3) keepdims=0 axes=[0,1] : float64[]
results %4
)";
    CHECK(steps_of(after("move_scalings_out_of_symmetric_sums", fires)) ==
          Lines{"step 0: %2 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[200,200]",
                "step 1: %3 = mul(%2, %1) : float64[200,200]", "step 2: %5 = sum(%2) keepdims=0 axes=[0,1] : float64[]",
                "step 3: %4 = mul(%5, %1) : float64[]", "results %4"});
    std::string refuses = fires;
    refuses.replace(refuses.find("%1 = input 1 : float64[]"), 24, "%1 = input 1 : float64[200]");
    CHECK(steps_of(after("move_scalings_out_of_symmetric_sums", refuses)) == steps_of(refuses));
  }
}

TEST_CASE("plan text: the schedule's stages, firing and refusing", "[jit][passes][text]") {
  SECTION("split_into_segments: steps that need no large shared operand run by sub-chunks; none without one") {
    // A shared operand of 362 x 362 float64 is over a quarter of the cache the plan is built for.
    const std::string fires = R"(plan device=cpu chunk_cache_bytes=262144
%0 = input 0 : float64[B,362]
%1 = input 1 : float64[362,362]
step 0: %2 = exp(%0) : float64[B,362]
step 1: %3 = matmul(%2, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[B,362]
step 2: %4 = exp(%3) : float64[B,362]
step 3: %5 = batch_sum(%4) : float64[362]
results %5
)";
    const std::string fired = after("order_for_chunks,split_into_segments", fires);
    // The exps by sub-chunks, each reading and writing 362 numbers an example; the product (the shared operand) and
    // the batch's sum (a reduction over the batch) over the whole chunk.
    CHECK(fired.find("segment first=0 last=1 by_sub_chunks=1 bytes_per_example=5792\n"
                     "segment first=1 last=2 by_sub_chunks=0 bytes_per_example=5792\n"
                     "segment first=2 last=3 by_sub_chunks=1 bytes_per_example=5792\n"
                     "segment first=3 last=4 by_sub_chunks=0 bytes_per_example=2896\n") != std::string::npos);
    // The same steps with a shared operand of 362 x 4: nothing to stream, no segments.
    const std::string small = R"(plan device=cpu chunk_cache_bytes=262144
%0 = input 0 : float64[B,362]
%1 = input 1 : float64[362,4]
step 0: %2 = exp(%0) : float64[B,362]
step 1: %3 = matmul(%2, %1) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[B,4]
step 2: %4 = exp(%3) : float64[B,4]
step 3: %5 = batch_sum(%4) : float64[4]
results %5
)";
    CHECK(after("order_for_chunks,split_into_segments", small).find("segment") == std::string::npos);
  }
  SECTION("fuse_elementwise: adjacent elementwise steps of one shape run tile by tile; not across a product") {
    const std::string fires = R"(plan device=cpu
%0 = input 0 : float64[64,64]
%1 = constant : float64[] = [2]
step 0: %2 = mul(%0, %1) : float64[64,64]
step 1: %3 = exp(%2) : float64[64,64]
step 2: %4 = mul(%3, %0) : float64[64,64]
results %4
)";
    const std::string fired = after("plan_memory,precompute_views,fuse_elementwise", fires);
    CHECK(fired.find("fused first=0 last=3 tiled=[0,1,2]") != std::string::npos);
    const std::string refuses = R"(plan device=cpu
%0 = input 0 : float64[64,64]
step 0: %1 = exp(%0) : float64[64,64]
step 1: %2 = matmul(%1, %0) transpose_a=0 transpose_b=0 symmetric=0 lower_only=0 : float64[64,64]
step 2: %3 = exp(%2) : float64[64,64]
results %3
)";
    CHECK(after("plan_memory,precompute_views,fuse_elementwise", refuses).find("fused") == std::string::npos);
  }
}

// Every optional pass has its sections above: a plan where it fires and one where it refuses.
TEST_CASE("plan text: every optional pass is tested on text", "[jit][passes][text]") {
  std::ifstream file(VTAPE_SOURCE_DIR "/tests/test_jit_text.cpp");
  std::stringstream text;
  text << file.rdbuf();
  for (const detail::Pass& p : detail::plan_passes()) {
    INFO(p.name);
    if (p.optional) CHECK(text.str().find(std::string("SECTION(\"") + p.name) != std::string::npos);
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
  // `base` with `from` replaced by `to`, and what the verifier raises for that.
  const auto replaced = [](const std::string& base, const std::string& from, const std::string& to) {
    std::string text = base;
    REQUIRE(text.find(from) != std::string::npos);
    return text.replace(text.find(from), from.size(), to);
  };
  const auto broken = [&](const std::string& base, const std::string& from, const std::string& to) {
    return verifying(replaced(base, from, to));
  };
  // A step read before it runs: the steps swapped.
  CHECK(broken(good, "step 1: %2 = cho_factor(%1) lower_only=1 : float64[4,4]\nstep 2: %3 = logdet(%1, %2) : float64[]",
               "step 1: %3 = logdet(%1, %2) : float64[]\nstep 2: %2 = cho_factor(%1) lower_only=1 : float64[4,4]")
            .find("the plan is wrong after the pass a_test: step 1 reads %2 before anything makes it") !=
        std::string::npos);
  // A type the shape rule does not give.
  CHECK(broken(good, "logdet(%1, %2) : float64[]", "logdet(%1, %2) : float64[4]")
            .find("step 2 (logdet) makes %3 of type float64[4], where its shape rule gives float64[]") !=
        std::string::npos);
  // An upper triangle left unwritten that a reader reads.
  CHECK(
      broken(good, "results %3", "results %3, %2")
          .find("step 1 (cho_factor) leaves %2's upper triangle unwritten, but a reader or a result reads it whole") !=
      std::string::npos);
  // A product whose shape rule refuses it; one marked symmetric that cannot be.
  CHECK(broken(good, "transpose_b=1 symmetric=1", "transpose_b=0 symmetric=1")
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
  CHECK(broken(memory, "offset=64", "offset=0").find("%1 and %2 share bytes of an arena ([0, 64) and [0, 64))") !=
        std::string::npos);
  CHECK(broken(memory, "arena_fixed=128", "arena_fixed=100")
            .find("%2 lies at [64, 128), outside its arena of 100 bytes") != std::string::npos);
  // A fused run: its steps in plan order, each run after what it reads, a scratch slot's value read by its tiles only.
  const std::string fused = R"(plan device=cpu arena_fixed=32768 memory_planned=1
%0 = input 0 : float64[64,64] root=%0
%1 = constant : float64[] = [2] root=%1
step 0: %2 = mul(%0, %1) : float64[64,64] root=%2 offset=0
step 1: %3 = exp(%2) : float64[64,64] root=%3 offset=0
step 2: %4 = mul(%3, %0) : float64[64,64] root=%4 output_buffer
fused first=0 last=3 tiled=[0,1,2] before=[] after=[] slot=[0,1,-1] slots=2 slot_bytes=32768 sum_dtype=float64 has_sum=0 lower_triangle=0 mirrored=[]
results %4
)";
  CHECK(verifying(fused).empty());
  CHECK(broken(fused, "tiled=[0,1,2]", "tiled=[1,0,2]").find("fused run 0 lists steps out of plan order: [1,0,2]") !=
        std::string::npos);
  CHECK(broken(fused, "tiled=[0,1,2] before=[] after=[] slot=[0,1,-1]", "tiled=[0,2] before=[] after=[1] slot=[0,-1]")
            .find("fused run 0 runs step 2 before step 1, which makes its input %3") != std::string::npos);
  CHECK(broken(fused, "slot=[0,1,-1]", "slot=[0,1,0]")
            .find("fused run 0 keeps %4 in a scratch slot, but a result or a step outside its later tiles reads it") !=
        std::string::npos);
  CHECK(broken(fused, "first=0 last=3", "first=0 last=2")
            .find("fused run 0's steps before, tiled and after are not exactly steps [0, 2)") != std::string::npos);
  // A fused run's memory: %1 dies at step 1, so the plan's order lets %3 take its bytes; the run's order may not.
  const std::string tiles = R"(plan device=cpu arena_fixed=114688 memory_planned=1
%0 = input 0 : float64[64,64] root=%0
step 0: %1 = exp(%0) : float64[64,64] root=%1 offset=0
step 1: %2 = sin(%1) : float64[64,64] root=%2 offset=40960
step 2: %3 = cos(%0) : float64[64,64] root=%3 offset=81920
step 3: %4 = mul(%2, %3) : float64[64,64] root=%4 output_buffer
fused first=0 last=3 tiled=[0,1,2] before=[] after=[] slot=[-1,-1,-1] slots=0 slot_bytes=0 sum_dtype=float64 has_sum=0 lower_triangle=0 mirrored=[]
results %4
)";
  CHECK(verifying(tiles).empty());
  // The same elements of %1's buffer, tile by tile: safe. Shifted by eight elements: tile t of %3 would write over
  // what tile t + 1 of step 0 writes and step 1 reads.
  CHECK(broken(tiles, "offset=81920", "offset=0").empty());
  CHECK(broken(tiles, "offset=81920", "offset=64")
            .find("fused run 0's tiles write %1 (step 0) and write %3 (step 2) in bytes that overlap, not as the same "
                  "elements") != std::string::npos);
  // Step 2 run before the tiles: now before step 0 writes %1, so it may not share %1's bytes at all.
  const std::string moved = replaced(tiles, "tiled=[0,1,2] before=[] after=[] slot=[-1,-1,-1]",
                                     "tiled=[0,1] before=[2] after=[] slot=[-1,-1]");
  CHECK(verifying(moved).empty());
  CHECK(broken(moved, "offset=81920", "offset=0")
            .find("fused run 0 runs steps 0 and 2 in the other order than the plan's, but %1 and %3 share bytes") !=
        std::string::npos);
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
  // Too few or too many inputs, refused before anything reads them; an op of any number takes any.
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3,3]\nstep 0: %1 = matmul(%0) : float64[3,3]\n")
            .find("line 3 (\"step 0: %1 = matmul(%0) : float64[3,3]\"): matmul takes 2 inputs, not 1") !=
        std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3]\nstep 0: %1 = exp(%0, %0) : float64[3]\n")
            .find("exp takes 1 input, not 2") != std::string::npos);
  CHECK(reading("plan device=cpu\n%0 = input 0 : float64[3]\nstep 0: %1 = concatenate(%0, %0, %0) axis=0 : "
                "float64[9]\nresults %1\n") == "no error");
  // Eager ops check it too (an op applied to the wrong number of inputs is the library's bug, not a crash).
  CHECK(error_of([] { apply(mul_op, {Tensor::from_vector({1.0}, {1})}); }).find("mul: takes 2 inputs, got 1") !=
        std::string::npos);
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
