// A plan as text and back (plan.hpp: plan_text, parse_plan). One line per value that no step makes, per fold and per
// step, with every attribute by name (core/graph.hpp's op registry names them), and the schedule and memory layout
// where the pipeline has set them, so that what a pass did can be read and a pass can be tested on a plan written by
// hand:
//
//   plan device=cpu
//   %0 = input 0 : float64[B,3,3]
//   %1 = constant : float64[3] = [1, 0.5, 2]
//   step 0: %2 = matmul(%0, %0) transpose_a=0 transpose_b=1 symmetric=1 lower_only=0 : float64[B,3,3] by=...
//   results %2
//
// A value is %index; `B` first in a type marks it batched. Small CPU constants are written out; larger ones are
// <elided> and read back from the tensors parse_plan is given. A loop's body (an attribute that is not a number) has
// no text: such a plan is written, not read back.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../../ops/batch.hpp"
#include "plan.hpp"

namespace vt::detail {

namespace {

constexpr std::int64_t most_written_elements = 64;

std::string name(int v) { return fmt::format("%{}", v); }

// One field of an op's registered attributes (OpRegistration::attr_names): its name and how it is packed.
struct Field {
  enum class Kind { integer, shape, dtype };
  std::string_view name;
  Kind kind;
};

std::vector<Field> fields_of(const OpRegistration& reg) {
  std::vector<Field> out;
  std::string_view names = reg.attr_names;
  while (!names.empty()) {
    const std::size_t end = std::min(names.find(' '), names.size());
    std::string_view field = names.substr(0, end);
    names.remove_prefix(std::min(end + 1, names.size()));
    Field::Kind kind = Field::Kind::integer;
    if (field.ends_with("[]")) {
      kind = Field::Kind::shape;
      field.remove_suffix(2);
    } else if (field.ends_with(":dtype")) {
      kind = Field::Kind::dtype;
      field.remove_suffix(6);
    }
    out.push_back({field, kind});
  }
  return out;
}

// The attributes by the names the op registered; raw integers where it registered none that fit.
std::string attrs_text(const PlanStep& s) {
  const OpRegistration* reg = registration_of(*s.op);
  std::vector<std::string> out;
  std::size_t i = 0;
  bool fits = reg != nullptr;
  if (fits) {
    for (const Field& f : fields_of(*reg)) {
      fits = i < s.attrs.ints.size();
      if (!fits) break;
      if (f.kind == Field::Kind::shape) {
        const std::int64_t n = s.attrs.ints[i];
        fits = n >= 0 && i + 1 + static_cast<std::size_t>(n) <= s.attrs.ints.size();
        if (!fits) break;
        out.push_back(fmt::format("{}=[{}]", f.name,
                                  fmt::join(s.attrs.ints.begin() + static_cast<std::ptrdiff_t>(i + 1),
                                            s.attrs.ints.begin() + static_cast<std::ptrdiff_t>(i + 1 + n), ",")));
        i += 1 + static_cast<std::size_t>(n);
      } else if (f.kind == Field::Kind::dtype) {
        out.push_back(fmt::format("{}={}", f.name, name_of(static_cast<DType>(s.attrs.ints[i++]))));
      } else {
        out.push_back(fmt::format("{}={}", f.name, s.attrs.ints[i++]));
      }
    }
    fits = fits && i == s.attrs.ints.size();
  }
  if (!fits) {
    out.clear();
    if (!s.attrs.ints.empty()) out.push_back(fmt::format("ints=[{}]", fmt::join(s.attrs.ints, ",")));
  }
  if (!s.attrs.reals.empty()) out.push_back(fmt::format("reals=[{}]", fmt::join(s.attrs.reals, ",")));
  if (s.attrs.object) out.emplace_back("object=<opaque>");
  return fmt::format("{}", fmt::join(out, " "));
}

std::string op_name(const OpDef& op) {
  const OpRegistration* reg = registration_of(op);
  return std::string(reg ? reg->name : op.name);
}

// Where the memory plan put the value, and what an analysis learnt of it: only what differs from a new value's.
std::string annotations(const Plan& plan, int v) {
  std::string out;
  if (static_cast<std::size_t>(v) < plan.buffers.size()) {
    const ValueBuffer& b = plan.buffers[static_cast<std::size_t>(v)];
    if (b.root >= 0) out += fmt::format(" root={}", name(b.root));
    if (b.offset >= 0) out += fmt::format(" offset={}", b.offset);
    if (b.output_buffer) out += " output_buffer";
    if (b.local) out += " local";
  }
  if (static_cast<std::size_t>(v) < plan.partial_offset.size() && plan.partial_offset[static_cast<std::size_t>(v)] >= 0)
    out += fmt::format(" partial={}", plan.partial_offset[static_cast<std::size_t>(v)]);
  return out;
}

std::string constant_data(const PlanValue& v) {
  const Tensor& t = v.constant;
  if (v.batched || t.device() != Device::cpu() || numel(v.shape) > most_written_elements) return "<elided>";
  if (v.dtype == DType::f32) return fmt::format("[{}]", fmt::join(t.to_vector<float>(), ", "));
  if (v.dtype == DType::f64) return fmt::format("[{}]", fmt::join(t.to_vector<double>(), ", "));
  if (v.dtype == DType::boolean) {
    std::vector<int> bits;
    for (bool b : t.to_vector<bool>()) bits.push_back(b ? 1 : 0);
    return fmt::format("[{}]", fmt::join(bits, ", "));
  }
  return fmt::format("[{}]", fmt::join(t.astype(DType::i64).to_vector<std::int64_t>(), ", "));
}

std::string step_line(const Plan& plan, const PlanStep& s, const char* kind, std::size_t index) {
  std::vector<std::string> in;
  for (int v : s.in) in.push_back(name(v));
  const std::string attrs = attrs_text(s);
  std::string line = fmt::format("{} {}: {} = {}({}){}{} : {}{}", kind, index, name(s.out), op_name(*s.op),
                                 fmt::join(in, ", "), attrs.empty() ? "" : " ", attrs,
                                 type_text(plan.values[static_cast<std::size_t>(s.out)]), annotations(plan, s.out));
  if (s.made_by >= 0) line += fmt::format(" by={}", plan_passes()[static_cast<std::size_t>(s.made_by)].name);
  return line + "\n";
}

std::string list(const std::vector<int>& xs) { return fmt::format("[{}]", fmt::join(xs, ",")); }

}  // namespace

std::string type_text(const PlanValue& v) {
  std::vector<std::string> axes;
  if (v.batched) axes.emplace_back("B");
  for (std::int64_t n : v.shape) axes.push_back(fmt::format("{}", n));
  return fmt::format("{}[{}]", name_of(v.dtype), fmt::join(axes, ","));
}

std::string step_text(const Plan& plan, const PlanStep& s) {
  const std::string attrs = attrs_text(s);
  return attrs.empty() ? op_name(*s.op) : fmt::format("{} {}", op_name(*s.op), attrs);
}

std::string plan_text(const Plan& plan) {
  if (!plan.runs_op_by_op.empty()) return fmt::format("plan runs_op_by_op: {}\n", plan.runs_op_by_op);
  std::string out = fmt::format("plan device={}", to_string(plan.device));
  if (plan.fixed_batch >= 0) out += fmt::format(" fixed_batch={}", plan.fixed_batch);
  if (plan.chunk_cache_bytes > 0) out += fmt::format(" chunk_cache_bytes={}", plan.chunk_cache_bytes);
  if (plan.chunkable) out += fmt::format(" chunkable=1 chunk_begin={} chunk_end={}", plan.chunk_begin, plan.chunk_end);
  const std::pair<const char*, std::int64_t> sizes[] = {
      {"arena_batched", plan.arena_batched},   {"arena_fixed", plan.arena_fixed},
      {"arena_local", plan.arena_local},       {"partial_bytes", plan.partial_bytes},
      {"chunk_io_bytes", plan.chunk_io_bytes}, {"kernel_calls_per_chunk", plan.kernel_calls_per_chunk}};
  for (const auto& [key, n] : sizes)
    if (n != 0) out += fmt::format(" {}={}", key, n);
  if (!plan.shared_reads.empty()) out += fmt::format(" shared_reads=[{}]", fmt::join(plan.shared_reads, ","));
  if (plan.memory_planned) out += " memory_planned=1";
  if (plan.views_computed) out += " views=1";
  out += "\n";
  for (std::size_t v = 0; v < plan.values.size(); ++v) {
    const PlanValue& pv = plan.values[v];
    const int i = static_cast<int>(v);
    if (pv.kind == PlanValue::Kind::input)
      out += fmt::format("{} = input {} : {}{}\n", name(i), pv.input, type_text(pv), annotations(plan, i));
    else if (pv.kind == PlanValue::Kind::constant)
      out +=
          fmt::format("{} = constant : {} = {}{}\n", name(i), type_text(pv), constant_data(pv), annotations(plan, i));
    else if (pv.producer < 0) out += fmt::format("{} = unused : {}{}\n", name(i), type_text(pv), annotations(plan, i));
  }
  for (std::size_t f = 0; f < plan.folds.size(); ++f) out += step_line(plan, plan.folds[f], "fold", f);
  for (std::size_t k = 0; k < plan.steps.size(); ++k) out += step_line(plan, plan.steps[k], "step", k);
  for (const Plan::Segment& s : plan.segments)
    out += fmt::format("segment first={} last={} by_sub_chunks={} bytes_per_example={}\n", s.first, s.last,
                       int{s.by_sub_chunks}, s.bytes_per_example);
  for (const FusedGroup& g : plan.fused) {
    std::vector<int> mirrored(g.mirrored.begin(), g.mirrored.end());
    out += fmt::format(
        "fused first={} last={} tiled={} before={} after={} slot={} slots={} slot_bytes={} sum_dtype={} has_sum={} "
        "lower_triangle={} mirrored={}\n",
        g.first, g.last, list(g.tiled), list(g.before), list(g.after), list(g.slot), g.slots, g.slot_bytes,
        name_of(g.sum_dtype), int{g.has_sum}, int{g.lower_triangle}, list(mirrored));
  }
  std::vector<std::string> results;
  for (int v : plan.outputs) results.push_back(name(v));
  out += fmt::format("results {}\n", fmt::join(results, ", "));
  return out;
}

// ---------------------------------------------------------------- reading it back

namespace {

class Reader {
 public:
  Reader(std::string_view text, const std::map<int, Tensor>& constants) : text_(text), constants_(constants) {}

  std::shared_ptr<Plan> read() {
    auto plan = std::make_shared<Plan>();
    plan_ = plan.get();
    std::size_t at = 0;
    while (at < text_.size()) {
      std::size_t end = text_.find('\n', at);
      if (end == std::string_view::npos) end = text_.size();
      ++line_number_;
      line_ = text_.substr(at, end - at);
      at = end + 1;
      tokens_ = split(line_);
      if (!tokens_.empty()) read_line();
    }
    finish();
    return plan;
  }

 private:
  template <class... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail("jit: plan text, line {} (\"{}\"): {}", line_number_, line_, fmt::format(format, std::forward<Args>(args)...));
  }

  // Words at bracket depth 0: "matmul(%0, %1)" and "[1, 2]" are one word each.
  std::vector<std::string_view> split(std::string_view line) const {
    std::vector<std::string_view> words;
    int depth = 0;
    std::size_t start = std::string_view::npos;
    for (std::size_t i = 0; i <= line.size(); ++i) {
      const char c = i < line.size() ? line[i] : ' ';
      if (c == '(' || c == '[' || c == '<') ++depth;
      if (c == ')' || c == ']' || c == '>') --depth;
      const bool space = (c == ' ' || c == '\t' || c == '\r') && depth <= 0;
      if (!space && start == std::string_view::npos) start = i;
      if (space && start != std::string_view::npos) {
        words.push_back(line.substr(start, i - start));
        start = std::string_view::npos;
      }
    }
    if (depth != 0) error("unbalanced brackets");
    return words;
  }

  template <class T>
  T number(std::string_view word) const {
    T x{};
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), x);
    if (ec != std::errc{} || end != word.data() + word.size()) error("\"{}\" is not a number", word);
    return x;
  }

  int value_id(std::string_view word) const {
    if (!word.starts_with('%')) error("\"{}\" is not a value (%index)", word);
    const int v = number<int>(word.substr(1));
    if (v < 0) error("a value's index is not negative");
    return v;
  }

  // "[1, 2,3]" -> its words between the commas.
  std::vector<std::string_view> items(std::string_view word) const {
    if (word.size() < 2 || word.front() != '[' || word.back() != ']') error("\"{}\" is not a list [a, b]", word);
    std::vector<std::string_view> out;
    std::string_view rest = word.substr(1, word.size() - 2);
    while (!rest.empty()) {
      const std::size_t comma = std::min(rest.find(','), rest.size());
      std::string_view item = rest.substr(0, comma);
      while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
      while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
      if (item.empty()) error("an empty item in \"{}\"", word);
      out.push_back(item);
      rest.remove_prefix(std::min(comma + 1, rest.size()));
    }
    return out;
  }

  template <class T>
  std::vector<T> numbers(std::string_view word) const {
    std::vector<T> out;
    for (std::string_view item : items(word)) out.push_back(number<T>(item));
    return out;
  }

  DType dtype(std::string_view word) const {
    for (DType d : {DType::f32, DType::f64, DType::i32, DType::i64, DType::boolean})
      if (word == name_of(d)) return d;
    error("\"{}\" is not a dtype (float32, float64, int32, int64, bool)", word);
  }

  // "float64[B,3]" -> a new value of that type.
  PlanValue type(std::string_view word, PlanValue::Kind kind) const {
    const std::size_t open = word.find('[');
    if (open == std::string_view::npos) error("\"{}\" is not a type such as float64[B,3]", word);
    std::vector<std::string_view> axes;
    if (word.substr(open) != "[]") axes = items(word.substr(open));
    const bool batched = !axes.empty() && axes.front() == "B";
    Shape shape;
    for (std::size_t i = batched ? 1 : 0; i < axes.size(); ++i) shape.push_back(number<std::int64_t>(axes[i]));
    return PlanValue(kind, dtype(word.substr(0, open)), shape, batched);
  }

  PlanValue& define(int v, PlanValue value) {
    if (values_.size() <= static_cast<std::size_t>(v)) values_.resize(static_cast<std::size_t>(v) + 1);
    if (values_[static_cast<std::size_t>(v)]) error("%{} is defined twice", v);
    if (buffers_.size() <= static_cast<std::size_t>(v)) buffers_.resize(static_cast<std::size_t>(v) + 1);
    values_[static_cast<std::size_t>(v)] = std::move(value);
    return *values_[static_cast<std::size_t>(v)];
  }

  // key=value words (and bare flags) from `first` on, into the value's and the plan's fields.
  void annotate(int v, std::size_t first, PlanStep* step) {
    ValueBuffer& b = buffers_[static_cast<std::size_t>(v)];
    for (std::size_t i = first; i < tokens_.size(); ++i) {
      const std::string_view word = tokens_[i];
      const std::size_t eq = word.find('=');
      const std::string_view key = word.substr(0, eq), val = eq == std::string_view::npos ? "" : word.substr(eq + 1);
      if (key == "root") b.root = value_id(val);
      else if (key == "offset") b.offset = number<std::int64_t>(val);
      else if (key == "output_buffer") b.output_buffer = true;
      else if (key == "local") b.local = true;
      else if (key == "partial") partials_.emplace_back(v, number<std::int64_t>(val));
      else if (key == "by" && step) step->made_by = pass_index(val);
      else
        error(
            "\"{}\" is not an annotation of a value (root, offset, output_buffer, local, "
            "partial{})",
            word, step ? ", by" : "");
    }
  }

  int pass_index(std::string_view pass) const {
    const std::vector<Pass>& passes = plan_passes();
    for (std::size_t k = 0; k < passes.size(); ++k)
      if (pass == passes[k].name) return static_cast<int>(k);
    error("no pass is named \"{}\"", pass);
  }

  Attrs attrs(const OpRegistration& reg, std::size_t first, std::size_t last) const {
    Attrs a;
    std::vector<std::pair<std::string_view, std::string_view>> given;
    for (std::size_t i = first; i < last; ++i) {
      const std::size_t eq = tokens_[i].find('=');
      if (eq == std::string_view::npos) error("\"{}\" is not an attribute name=value", tokens_[i]);
      given.emplace_back(tokens_[i].substr(0, eq), tokens_[i].substr(eq + 1));
    }
    const auto take = [&](std::string_view key) -> std::optional<std::string_view> {
      for (auto& [k, v] : given)
        if (k == key) {
          k = {};
          return v;
        }
      return std::nullopt;
    };
    if (take("object")) error("{} holds a function (a loop's body), which a plan text cannot carry", reg.name);
    if (const auto raw = take("ints")) {
      a.ints = numbers<std::int64_t>(*raw);
    } else {
      for (const Field& f : fields_of(reg)) {
        const auto val = take(f.name);
        if (!val) error("{} needs its attribute {}", reg.name, f.name);
        if (f.kind == Field::Kind::shape) {
          const std::vector<std::int64_t> xs = numbers<std::int64_t>(*val);
          a.ints.push_back(static_cast<std::int64_t>(xs.size()));
          a.ints.insert(a.ints.end(), xs.begin(), xs.end());
        } else if (f.kind == Field::Kind::dtype) {
          a.ints.push_back(static_cast<std::int64_t>(dtype(*val)));
        } else {
          a.ints.push_back(number<std::int64_t>(*val));
        }
      }
    }
    if (const auto reals = take("reals")) a.reals = numbers<double>(*reals);
    for (const auto& [k, v] : given)
      if (!k.empty()) error("{} has no attribute {} (its attributes: {})", reg.name, k, reg.attr_names);
    return a;
  }

  // "step 3: %4 = op(%1, %2) attrs : type annotations" (or "fold 3: ...").
  void read_step(bool fold) {
    if (tokens_.size() < 7 || tokens_[3] != "=") error("a step reads: step N: %v = op(%a, ...) : type");
    std::vector<PlanStep>& list = fold ? plan_->folds : plan_->steps;
    if (number<std::size_t>(tokens_[1].substr(0, tokens_[1].size() - 1)) != list.size() || !tokens_[1].ends_with(':'))
      error("expected {} {}:", fold ? "fold" : "step", list.size());
    const int out = value_id(tokens_[2]);
    const std::string_view call = tokens_[4];
    const std::size_t open = call.find('(');
    if (open == std::string_view::npos || !call.ends_with(')')) error("\"{}\" is not op(%a, ...)", call);
    const OpRegistration* reg = registered_op(call.substr(0, open));
    if (!reg) error("no op is registered as \"{}\" (is its file linked into the program?)", call.substr(0, open));
    PlanStep s{reg->op, {}, {}, out};
    const std::string args = "[" + std::string(call.substr(open + 1, call.size() - open - 2)) + "]";
    if (args != "[]")
      for (std::string_view arg : items(args)) s.in.push_back(value_id(arg));
    if (reg->op->inputs >= 0 && s.in.size() != static_cast<std::size_t>(reg->op->inputs))
      error("{} takes {} input{}, not {}", reg->name, reg->op->inputs, reg->op->inputs == 1 ? "" : "s", s.in.size());
    std::size_t colon = 5;
    while (colon < tokens_.size() && tokens_[colon] != ":") ++colon;
    if (colon + 1 >= tokens_.size()) error("the step's type is missing (\" : float64[3]\")");
    s.attrs = attrs(*reg, 5, colon);
    PlanValue& v = define(out, type(tokens_[colon + 1], fold ? PlanValue::Kind::folded : PlanValue::Kind::computed));
    v.producer = static_cast<int>(list.size());
    list.push_back(std::move(s));
    annotate(out, colon + 2, &list.back());
  }

  // "%0 = input 0 : type", "%1 = constant : type = [data] or <elided>", "%2 = unused : type".
  void read_value() {
    const int v = value_id(tokens_[0]);
    if (tokens_.size() < 5 || tokens_[1] != "=") error("a value reads: %v = input|constant|unused ... : type");
    const std::string_view kind = tokens_[2];
    if (kind == "input") {
      if (tokens_.size() < 6 || tokens_[4] != ":") error("an input reads: %v = input N : type");
      define(v, type(tokens_[5], PlanValue::Kind::input)).input = number<int>(tokens_[3]);
      annotate(v, 6, nullptr);
    } else if (kind == "constant") {
      if (tokens_.size() < 7 || tokens_[3] != ":" || tokens_[5] != "=")
        error("a constant reads: %v = constant : type = [data] (or <elided>)");
      PlanValue& pv = define(v, type(tokens_[4], PlanValue::Kind::constant));
      pv.constant = constant(v, pv, tokens_[6]);
      annotate(v, 7, nullptr);
    } else if (kind == "unused") {
      if (tokens_[3] != ":") error("an unused value reads: %v = unused : type");
      define(v, type(tokens_[4], PlanValue::Kind::computed));
      annotate(v, 5, nullptr);
    } else {
      error("\"{}\" is not a kind of value (input, constant, unused)", kind);
    }
  }

  Tensor constant(int v, const PlanValue& pv, std::string_view data) const {
    if (data == "<elided>") {
      const auto it = constants_.find(v);
      if (it == constants_.end()) error("%{}'s data is elided; pass the tensor to parse_plan", v);
      const Tensor& t = it->second;
      if (t.dtype() != pv.dtype || t.shape() != pv.shape || t.is_batched() != pv.batched)
        error("the tensor given for %{} is {}, not {}", v,
              type_text(PlanValue(PlanValue::Kind::constant, t.dtype(), t.shape(), t.is_batched())), type_text(pv));
      return t;
    }
    if (pv.batched) error("a batched constant's data is not written; write <elided> and pass the tensor");
    const std::vector<std::string_view> words = items(data);
    if (static_cast<std::int64_t>(words.size()) != numel(pv.shape))
      error("%{} has {} elements, not {}", v, words.size(), numel(pv.shape));
    if (is_integer(pv.dtype) || pv.dtype == DType::boolean) {
      std::vector<std::int64_t> xs;
      for (std::string_view w : words) xs.push_back(number<std::int64_t>(w));
      if (pv.dtype != DType::boolean) return Tensor::from_ints(xs, pv.shape, pv.dtype);
      return Tensor::from_ints(xs, pv.shape).astype(DType::boolean);
    }
    std::vector<double> xs;
    for (std::string_view w : words) xs.push_back(number<double>(w));
    return Tensor::from_vector(xs, pv.shape, pv.dtype);
  }

  void read_header() {
    for (std::size_t i = 1; i < tokens_.size(); ++i) {
      const std::string_view word = tokens_[i];
      const std::size_t eq = word.find('=');
      if (eq == std::string_view::npos) error("\"{}\" is not key=value", word);
      const std::string_view key = word.substr(0, eq), val = word.substr(eq + 1);
      if (key == "device") plan_->device = parse_device(val);
      else if (key == "fixed_batch") plan_->fixed_batch = number<std::int64_t>(val);
      else if (key == "chunk_cache_bytes") plan_->chunk_cache_bytes = number<std::size_t>(val);
      else if (key == "chunkable") plan_->chunkable = number<int>(val) != 0;
      else if (key == "chunk_begin") plan_->chunk_begin = number<std::size_t>(val);
      else if (key == "chunk_end") plan_->chunk_end = number<std::size_t>(val);
      else if (key == "arena_batched") plan_->arena_batched = number<std::int64_t>(val);
      else if (key == "arena_fixed") plan_->arena_fixed = number<std::int64_t>(val);
      else if (key == "arena_local") plan_->arena_local = number<std::int64_t>(val);
      else if (key == "partial_bytes") plan_->partial_bytes = number<std::int64_t>(val);
      else if (key == "chunk_io_bytes") plan_->chunk_io_bytes = number<std::int64_t>(val);
      else if (key == "kernel_calls_per_chunk") plan_->kernel_calls_per_chunk = number<std::int64_t>(val);
      else if (key == "shared_reads") plan_->shared_reads = numbers<std::int64_t>(val);
      else if (key == "memory_planned") plan_->memory_planned = number<int>(val) != 0;
      else if (key == "views") views_ = number<int>(val) != 0;
      else error("the plan has no field {}", key);
    }
  }

  // "key=value" words of a segment or fused line.
  std::string_view field(std::string_view key) const {
    for (std::size_t i = 1; i < tokens_.size(); ++i)
      if (tokens_[i].starts_with(key) && tokens_[i].size() > key.size() && tokens_[i][key.size()] == '=')
        return tokens_[i].substr(key.size() + 1);
    error("the line needs {}=", key);
  }

  void read_line() {
    const std::string_view head = tokens_[0];
    if (head.starts_with('#')) return;
    if (head == "plan") {
      if (tokens_.size() > 1 && tokens_[1] == "runs_op_by_op:") error("a plan that runs op by op has no steps to read");
      read_header();
    } else if (head == "step" || head == "fold") {
      read_step(head == "fold");
    } else if (head.starts_with('%')) {
      read_value();
    } else if (head == "segment") {
      plan_->segments.push_back({number<std::size_t>(field("first")), number<std::size_t>(field("last")),
                                 number<int>(field("by_sub_chunks")) != 0,
                                 number<std::int64_t>(field("bytes_per_example"))});
    } else if (head == "fused") {
      read_fused();
    } else if (head == "results") {
      for (std::size_t i = 1; i < tokens_.size(); ++i) {
        std::string_view w = tokens_[i];
        if (w.ends_with(',')) w.remove_suffix(1);
        plan_->outputs.push_back(value_id(w));
      }
    } else {
      error("a line starts with plan, %v, fold, step, segment, fused, results or #");
    }
  }

  void read_fused() {
    FusedGroup g;
    g.first = number<int>(field("first"));
    g.last = number<int>(field("last"));
    g.tiled = numbers<int>(field("tiled"));
    g.before = numbers<int>(field("before"));
    g.after = numbers<int>(field("after"));
    g.slot = numbers<int>(field("slot"));
    g.slots = number<int>(field("slots"));
    g.slot_bytes = number<std::size_t>(field("slot_bytes"));
    g.sum_dtype = dtype(field("sum_dtype"));
    g.has_sum = number<int>(field("has_sum")) != 0;
    g.lower_triangle = number<int>(field("lower_triangle")) != 0;
    for (int m : numbers<int>(field("mirrored"))) g.mirrored.push_back(m != 0);
    plan_->fused.push_back(std::move(g));
  }

  void finish() {
    for (std::size_t v = 0; v < values_.size(); ++v) {
      if (!values_[v]) fail("jit: plan text: %{} is read or counted but never defined", v);
      plan_->values.push_back(std::move(*values_[v]));
    }
    const auto defined = [&](int v) { return static_cast<std::size_t>(v) < plan_->values.size(); };
    for (const auto* list : {&plan_->steps, &plan_->folds})
      for (const PlanStep& s : *list)
        for (int v : s.in)
          if (!defined(v)) fail("jit: plan text: a step reads %{}, which is never defined", v);
    for (int v : plan_->outputs)
      if (!defined(v)) fail("jit: plan text: the result %{} is never defined", v);
    // The buffers as plan_memory left them, where the text has them (a root is every value's once it ran).
    buffers_.resize(plan_->values.size());
    if (std::any_of(buffers_.begin(), buffers_.end(), [](const ValueBuffer& b) { return b.root >= 0; }))
      plan_->buffers = std::move(buffers_);
    if (!partials_.empty()) {
      plan_->partial_offset.assign(plan_->values.size(), -1);
      for (const auto& [v, at] : partials_) plan_->partial_offset[static_cast<std::size_t>(v)] = at;
    }
    for (std::size_t g = 0; g < plan_->fused.size(); ++g) {
      if (plan_->fused_at.empty()) plan_->fused_at.assign(plan_->steps.size(), -1);
      const auto first = static_cast<std::size_t>(plan_->fused[g].first);
      if (first >= plan_->fused_at.size()) fail("jit: plan text: fused run {} starts past the last step", g);
      plan_->fused_at[first] = static_cast<int>(g);
    }
    // What find_batch_size learns from the steps: a plan whose steps run functions or talk to other processes is
    // never recorded for replay.
    for (const PlanStep& s : plan_->steps)
      if (s.op->collective || s.op->runs_functions) plan_->unrecordable = true;
    if (views_) precompute_views(*plan_);
  }

  std::string_view text_;
  const std::map<int, Tensor>& constants_;
  Plan* plan_ = nullptr;
  std::vector<std::optional<PlanValue>> values_;
  std::vector<ValueBuffer> buffers_;
  std::vector<std::pair<int, std::int64_t>> partials_;
  std::vector<std::string_view> tokens_;
  std::string_view line_;
  int line_number_ = 0;
  bool views_ = false;
};

}  // namespace

std::shared_ptr<Plan> parse_plan(std::string_view text, const std::map<int, Tensor>& constants) {
  return Reader(text, constants).read();
}

}  // namespace vt::detail
