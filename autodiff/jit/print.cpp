// PlanSummary and JitCounters as text: one line per field, its name as in jit.hpp, its value and
// what it counts, so that a printed summary needs no header open beside it.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include "plan.hpp"

// A field added to either struct must be printed below too.
static_assert(sizeof(vt::PlanSummary) == 11 * sizeof(std::int64_t) + sizeof(std::vector<std::string>) +
                                             sizeof(std::map<std::string, std::int64_t>),
              "print every PlanSummary field");
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
    out = fmt::format_to(out, "{}{:<{}}  {:>{}}  {}", i ? "\n" : "", lines[i].name, name_width, lines[i].value,
                         value_width, lines[i].what);
  return out;
}

std::string count(std::int64_t n) { return fmt::format("{}", n); }
std::string ms(double t) { return fmt::format("{:.3f}", t); }
std::string rewrites(const vt::PlanSummary& s) {
  if (s.rewrites.empty()) return "-";
  std::vector<std::string> parts;
  for (const auto& [pass, n] : s.rewrites) parts.push_back(fmt::format("{} {}", pass, n));
  return fmt::format("{}", fmt::join(parts, ", "));
}

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
          {"fused", count(s.fused), "elementwise steps run tile by tile"},
          {"fused_runs", count(s.fused_runs), "runs of those that tile"},
          {"fused_lower", count(s.fused_lower), "of those steps, run over a lower triangle"},
          {"arena_bytes_per_example", count(s.arena_bytes_per_example), "bytes of batched buffers, times B per call"},
          {"arena_bytes_fixed", count(s.arena_bytes_fixed), "bytes of unbatched buffers"},
          {"passes", s.passes.empty() ? "-" : fmt::format("{}", fmt::join(s.passes, ", ")),
           "passes that changed the plan"},
          {"rewrites", rewrites(s), "by pass: its rewrites (or the steps it made or changed)"},
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
          {"recordings", count(c.recordings), "batch sizes recorded (GPU graphs, small CPU plans)"},
          {"replays", count(c.replays), "calls that replayed a recording"},
          {"arenas", count(c.arenas), "arenas allocated for calls"},
          {"chunked_calls", count(c.chunked_calls), "calls run by chunks of examples (CPU)"},
          {"chunk_examples", count(c.chunk_examples), "examples per chunk in the latest chunked call"},
      },
      ctx.out());
}

namespace vt::detail {

namespace {

std::string value_name(const Plan& plan, int v) {
  const PlanValue& pv = plan.values[static_cast<std::size_t>(v)];
  if (pv.kind == PlanValue::Kind::input) return fmt::format("arg{}", pv.input);
  if (pv.kind == PlanValue::Kind::constant) return fmt::format("c{}", v);
  return fmt::format("v{}", v);
}

std::string typed(const Plan& plan, int v) {
  return fmt::format("{} {}", value_name(plan, v), type_text(plan.values[static_cast<std::size_t>(v)]));
}

std::string bytes(std::int64_t n) {
  if (n < 10 * 1024) return fmt::format("{} B", n);
  if (n < 10 * 1024 * 1024) return fmt::format("{:.1f} KiB", static_cast<double>(n) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(n) / (1024 * 1024));
}

std::string buffer(const Plan& plan, const PlanStep& s, int slot) {
  const PlanValue& out = plan.values[static_cast<std::size_t>(s.out)];
  if (out.kind == PlanValue::Kind::folded) return "kept";
  if (slot >= 0) return fmt::format("tile slot {}", slot);
  if (static_cast<std::size_t>(s.out) >= plan.buffers.size()) return "-";
  const ValueBuffer& b = plan.buffers[static_cast<std::size_t>(s.out)];
  if (b.root >= 0 && b.root != s.out) return fmt::format("view of {}", value_name(plan, b.root));
  if (b.output_buffer) return "result";
  if (b.offset < 0) return "-";
  return fmt::format("{}+{}{}", b.local ? "sub " : "", b.offset, out.batched ? "/ex" : "");
}

}  // namespace

std::string explain_plan(const Plan& plan, std::int64_t batch) {
  if (!plan.runs_op_by_op.empty())
    return fmt::format("no plan: calls run the function op by op, as {}\n", plan.runs_op_by_op);
  const std::int64_t chunk = batch > 0 ? examples_per_chunk(plan, batch) : 0;
  std::string out = fmt::format("plan on {}: {} steps ({} kernels), {} folded (run on the first call only)\n",
                                to_string(plan.device), plan.steps.size(), plan.summary.kernels, plan.folds.size());
  if (batch > 0 && chunk > 0)
    out += fmt::format(
        "at B = {}: steps {}-{} run by chunks of {} example{} ({} chunks, for a cache of {}), the others once\n", batch,
        plan.chunk_begin, plan.chunk_end - 1, chunk, chunk == 1 ? "" : "s", (batch + chunk - 1) / chunk,
        bytes(static_cast<std::int64_t>(plan.chunk_cache_bytes)));
  else if (batch > 0)
    out += fmt::format("at B = {}: every step over the whole batch{}\n", batch,
                       plan.chunkable ? "" : " (the plan cannot run by chunks)");
  // By step: how many examples each run of it takes, where a segment runs by sub-chunks.
  std::vector<std::int64_t> sub(plan.steps.size(), 0);
  if (batch > 0 && chunk > 0) {
    for (std::size_t g = 0; g < plan.segments.size(); ++g) {
      const Plan::Segment& seg = plan.segments[g];
      const std::int64_t per = sub_chunk_examples(plan, seg, chunk);
      out += fmt::format("  segment {}: steps {}-{}, {}\n", g, seg.first, seg.last - 1,
                         per < chunk ? fmt::format("by sub-chunks of {} example{}", per, per == 1 ? "" : "s")
                                     : std::string("over the whole chunk"));
      for (std::size_t i = seg.first; i < seg.last; ++i) sub[i] = per < chunk ? per : 0;
    }
  }
  out += fmt::format("arena: {} per example, {} fixed", bytes(plan.arena_batched), bytes(plan.arena_fixed));
  out += plan.arena_local > 0 ? fmt::format(", {} per example of a sub-chunk\n", bytes(plan.arena_local)) : "\n";
  out += fmt::format("passes that changed it: {}\n",
                     plan.summary.passes.empty() ? "none" : fmt::format("{}", fmt::join(plan.summary.passes, ", ")));
  // By step: its fused run, and its scratch slot there.
  std::vector<std::string> run(plan.steps.size(), "-");
  std::vector<int> slot(plan.steps.size(), -1);
  for (std::size_t g = 0; g < plan.fused.size(); ++g) {
    const FusedGroup& group = plan.fused[g];
    for (int i = group.first; i < group.last; ++i) run[static_cast<std::size_t>(i)] = fmt::format("run {}", g);
    for (std::size_t k = 0; k < group.tiled.size(); ++k) {
      run[static_cast<std::size_t>(group.tiled[k])] = fmt::format("run {} tiled", g);
      slot[static_cast<std::size_t>(group.tiled[k])] = group.slot.empty() ? -1 : group.slot[k];
    }
  }
  std::vector<std::array<std::string, 8>> rows;
  rows.push_back({"step", "op", "inputs", "output", "runs", "fused", "buffer", "made by"});
  const std::vector<Pass>& passes = plan_passes();
  const auto made_by = [&](const PlanStep& s) {
    return s.made_by < 0 ? "trace" : passes[static_cast<std::size_t>(s.made_by)].name;
  };
  const auto inputs = [&](const PlanStep& s) {
    std::vector<std::string> in;
    for (int v : s.in) in.push_back(typed(plan, v));
    return fmt::format("{}", fmt::join(in, ", "));
  };
  for (std::size_t f = 0; f < plan.folds.size(); ++f) {
    const PlanStep& s = plan.folds[f];
    rows.push_back({fmt::format("f{}", f), step_text(plan, s), inputs(s), typed(plan, s.out), "first call", "-", "kept",
                    made_by(s)});
  }
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    std::string runs = "once";
    if (plan.chunkable && batch > 0 && chunk > 0)
      runs = i < plan.chunk_begin  ? "before chunks"
             : i >= plan.chunk_end ? "after chunks"
             : sub[i] > 0          ? fmt::format("per {} ex", sub[i])
                                   : "per chunk";
    else if (plan.values[static_cast<std::size_t>(s.out)].batched) runs = "whole batch";
    rows.push_back({fmt::format("{}", i), step_text(plan, s), inputs(s), typed(plan, s.out), runs, run[i],
                    buffer(plan, s, slot[i]), made_by(s)});
  }
  std::array<std::size_t, 8> width{};
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  for (const auto& r : rows) {
    std::string line = fmt::format("{:>{}}", r[0], width[0]);
    for (std::size_t c = 1; c < r.size(); ++c) line += fmt::format("  {:<{}}", r[c], c + 1 == r.size() ? 0 : width[c]);
    out += line + "\n";
  }
  return out;
}

}  // namespace vt::detail
