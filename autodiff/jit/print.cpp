// PlanSummary and JitCounters as text: one line per field, its name as in jit.hpp, its value and
// what it counts, so that a printed summary needs no header open beside it.
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../jit.hpp"

// A field added to either struct must be printed below too.
static_assert(sizeof(vt::PlanSummary) == 16 * sizeof(std::int64_t), "print every PlanSummary field");
static_assert(sizeof(vt::JitCounters) == 10 * sizeof(std::int64_t), "print every JitCounters field");

namespace {

struct Line {
  const char* name;
  std::string value;
  const char* what;
};

fmt::format_context::iterator print_lines(const std::vector<Line>& lines, fmt::format_context::iterator out) {
  std::size_t name_width = 0, value_width = 0;
  for (const Line& l : lines) {
    name_width = std::max(name_width, std::string(l.name).size());
    value_width = std::max(value_width, l.value.size());
  }
  for (std::size_t i = 0; i < lines.size(); ++i)
    out = fmt::format_to(out, "{}{:<{}}  {:>{}}  {}", i ? "\n" : "", lines[i].name, name_width, lines[i].value, value_width,
                         lines[i].what);
  return out;
}

std::string count(std::int64_t n) { return fmt::format("{}", n); }
std::string ms(double t) { return fmt::format("{:.3f}", t); }

}  // namespace

fmt::format_context::iterator fmt::formatter<vt::PlanSummary>::format(const vt::PlanSummary& s,
                                                                      format_context& ctx) const {
  return print_lines(
      {
          {"traced_ops", count(s.traced_ops), "ops recorded by the trace"},
          {"steps", count(s.steps), "steps of the plan, aliases included"},
          {"kernels", count(s.kernels), "steps that run a kernel"},
          {"constants", count(s.constants), "captured constants"},
          {"folded", count(s.folded), "steps on constants only, run on the first call and kept"},
          {"merged", count(s.merged), "common subexpressions removed"},
          {"reassociated", count(s.reassociated), "matmul chains reordered"},
          {"transposes_folded", count(s.transposes_folded), "transposes read by a matmul as a GEMM flag"},
          {"scalings_moved", count(s.scalings_moved), "scalings by one number moved out of symmetric sums"},
          {"row_sums_contracted", count(s.row_sums_contracted), "row sums of low-rank products contracted first"},
          {"solves_scaled", count(s.solves_scaled), "solves against s 1 taken from the solve against 1"},
          {"fused", count(s.fused), "elementwise steps run tile by tile"},
          {"fused_runs", count(s.fused_runs), "runs of those that tile"},
          {"fused_lower", count(s.fused_lower), "of those steps, run over a lower triangle"},
          {"arena_bytes_per_example", count(s.arena_bytes_per_example), "bytes of batched buffers, times B per call"},
          {"arena_bytes_fixed", count(s.arena_bytes_fixed), "bytes of unbatched buffers"},
      },
      ctx.out());
}

fmt::format_context::iterator fmt::formatter<vt::JitCounters>::format(const vt::JitCounters& c,
                                                                      format_context& ctx) const {
  return print_lines(
      {
          {"calls", count(c.calls), "calls of the jitted function"},
          {"traces", count(c.traces), "traces and plans built (cache misses)"},
          {"cache_hits", count(c.cache_hits), "calls that reused a plan"},
          {"trace_ms", ms(c.trace_ms), "milliseconds spent tracing, in all"},
          {"plan_ms", ms(c.plan_ms), "milliseconds spent planning, in all"},
          {"recordings", count(c.recordings), "batch sizes recorded (GPU graphs)"},
          {"replays", count(c.replays), "calls that replayed a recording"},
          {"arenas", count(c.arenas), "arenas allocated for calls"},
          {"chunked_calls", count(c.chunked_calls), "calls run by chunks of examples (CPU)"},
          {"chunk_examples", count(c.chunk_examples), "examples per chunk in the latest chunked call"},
      },
      ctx.out());
}
