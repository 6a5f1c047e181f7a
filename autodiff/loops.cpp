// Loops as ops (loops.hpp): the scan and while ops, whose forward runs the body's plan once per step,
// the closure conversion that makes the tensors a body reads from outside the loop's inputs, and
// scan's adjoint, a scan backwards over the body's pullback.
#include "loops.hpp"

#include "../core/backend.hpp"
#include "../core/graph.hpp"
#include "../ops/batch.hpp"
#include "../ops/creation.hpp"
#include "../ops/indexing.hpp"
#include "../ops/layout.hpp"
#include "../ops/reduce.hpp"
#include "grad.hpp"
#include "jit.hpp"
#include "kernel_tensors.hpp"

#include <algorithm>
#include <exception>
#include <functional>
#include <mutex>

namespace vt::detail {

namespace {

// A body, recorded once when the loop is called: its own arguments (symbolic: the step index, the
// carry and, with xs, x), the tensors it reads from outside that become the loop's inputs after its
// own (init, xs), and its results. It runs by replaying the recorded ops on other arguments, so the
// function the user wrote (and what it refers to) is never called again.
struct LoopBody {
  std::vector<Tensor> params, lifted;
  PointerSet made;           // recorded inside: replayed; anything else is a constant
  std::int64_t kernels = 0;  // the ops of `made` that run a kernel: one step's kernel calls
  Tensor carry, y;
  std::shared_ptr<JitCache> plans = std::make_shared<JitCache>();
  // Recordings of the body that finished loops left, for the loop's next run (a jitted call runs it at every call):
  // recording a body costs a few of its steps, which a short loop would pay again at every call.
  mutable std::mutex idle_mutex;
  mutable std::vector<std::unique_ptr<RepeatedCall>> idle;
  static constexpr std::size_t idle_most = 4;  // threads running chunks at once, batch sizes in turn

  // The body on (own arguments..., lifted inputs...).
  std::pair<Tensor, Tensor> call(const std::vector<Tensor>& args) const {
    PointerMap<Tensor> value;
    for (std::size_t i = 0; i < params.size(); ++i) *value.try_emplace(&params[i].impl()).first = args[i];
    for (std::size_t k = 0; k < lifted.size(); ++k)
      *value.try_emplace(&lifted[k].impl()).first = args[params.size() + k];
    const auto replay = [&](const Tensor& root) {
      std::vector<Tensor> stack{root};  // iterative: a long body must not recurse as deep
      while (!stack.empty()) {
        const Tensor t = stack.back();
        const TensorImpl* p = &t.impl();
        if (value.contains(p)) {
          stack.pop_back();
          continue;
        }
        if (!made.contains(p) || !t.impl().node) {
          value.try_emplace(p, t);
          stack.pop_back();
          continue;
        }
        const Node& node = *t.impl().node;
        bool ready = true;
        for (const Tensor& in : node.inputs)
          if (!value.contains(&in.impl())) {
            stack.push_back(in);
            ready = false;
          }
        if (!ready) continue;
        std::vector<Tensor> inputs;
        for (const Tensor& in : node.inputs) inputs.push_back(value.at(&in.impl()));
        value.try_emplace(p, reapply(node, std::move(inputs)));
        stack.pop_back();
      }
      return value.at(&root.impl());
    };
    return {replay(carry), replay(y)};
  }
};

Tensor symbolic(DType dtype, const Shape& shape, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = dtype;
  impl->shape = shape;
  impl->device = device;
  return Tensor(std::move(impl));
}

// The kernels one call of the body runs: the ops made inside that its results depend on, aliases aside (what `made`
// names may have been freed since; only what the results hold is followed).
std::int64_t kernels_of(const LoopBody& body) {
  std::int64_t kernels = 0;
  PointerSet seen;
  std::vector<Tensor> stack{body.carry, body.y};
  while (!stack.empty()) {
    const Tensor t = stack.back();
    stack.pop_back();
    if (!t.defined()) continue;
    const TensorImpl* p = &t.impl();
    if (!body.made.contains(p) || !t.impl().node || !seen.insert(p)) continue;
    const Node& node = *t.impl().node;
    if (!node.op->aliases_input) ++kernels;
    for (const Tensor& x : node.inputs) stack.push_back(x);
  }
  return kernels;
}

// Records the body on symbolic arguments of these types (as jit traces a function). Of the tensors
// it reads from outside, those a plan could not hold as constants become the loop's inputs: traced
// values (of an enclosing trace or loop body), tensors a gradient tracks, and batched tensors (a
// chunk of a batch sees its own examples).
std::shared_ptr<LoopBody> record(const FlatBody& fn, const std::vector<Tensor>& like) {
  auto body = std::make_shared<LoopBody>();
  for (const Tensor& t : like) body->params.push_back(symbolic(t.dtype(), t.shape(), t.device()));
  const TracingScope tracing;
  const IsolatedTrace isolated;
  const DeferConstantOps defer;
  const PerExampleScope per_example;
  CaptureScope scope;
  for (const Tensor& p : body->params) scope.made(p);
  std::tie(body->carry, body->y) = fn(body->params);
  std::vector<Tensor> results{body->carry, body->y};
  scope.see(results);  // a result made outside (a value the body closes over) is read from there
  body->made = scope.take_made_inside();
  body->kernels = kernels_of(*body);
  for (const Tensor& c : scope.captured())
    if (c.is_symbolic() || c.impl().tracked || c.is_batched()) body->lifted.push_back(c);
  return body;
}

struct LoopAttrs {
  std::int64_t length = 0, carry = 0, y = 0;
  bool has_x = false, reverse = false;
  std::int64_t first_index = 0;
  auto fields() { return std::tie(length, carry, y, has_x, reverse, first_index); }
};

const LoopBody& body_of(const Attrs& attrs) { return *static_cast<const LoopBody*>(attrs.object.get()); }

// A recorded body taken for one run of a loop, given back to the body's idle recordings when the run ends (not when it
// fails: a failure may leave the recording mid-step).
class TakenCall {
 public:
  TakenCall() = default;
  TakenCall(std::unique_ptr<RepeatedCall> call, const LoopBody* body)
      : call_(std::move(call)), body_(body), failures_(std::uncaught_exceptions()) {}
  TakenCall(TakenCall&&) = default;
  TakenCall& operator=(TakenCall&&) = default;
  ~TakenCall() {
    if (!call_ || std::uncaught_exceptions() > failures_) return;
    const std::lock_guard lock(body_->idle_mutex);
    if (body_->idle.size() >= LoopBody::idle_most) body_->idle.erase(body_->idle.begin());  // the oldest goes
    body_->idle.push_back(std::move(call_));
  }
  explicit operator bool() const { return call_ != nullptr; }
  RepeatedCall* operator->() const { return call_.get(); }

 private:
  std::unique_ptr<RepeatedCall> call_;
  const LoopBody* body_ = nullptr;
  int failures_ = 0;
};

// The body's plan for these arguments, traced on a miss (once per batching of the arguments: a
// carry may become batched after a step), and run; run op by op where a plan cannot serve.
class BodyRunner {
 public:
  explicit BodyRunner(const LoopBody& body) : body_(body) {}
  std::vector<Tensor> operator()(const std::vector<Tensor>& args) {
    plan_for(args);
    if (entry_->runs_eagerly) {
      const auto [carry, y] = body_.call(args);
      return {carry, y};
    }
    return run_plan(*entry_->plan, args);
  }

  // The body's recorded plan for arguments like these, holding them (empty: it runs by calls as above): an idle
  // recording of the same plan and batch size where there is one, else a new one.
  TakenCall repeated(const std::vector<Tensor>& args) {
    plan_for(args);
    if (entry_->runs_eagerly) return {};
    std::unique_ptr<RepeatedCall> call;
    {
      const std::lock_guard lock(body_.idle_mutex);
      const auto it = std::find_if(body_.idle.begin(), body_.idle.end(),
                                   [&](const auto& c) { return c->serves(*entry_->plan, args); });
      if (it != body_.idle.end()) {
        call = std::move(*it);
        body_.idle.erase(it);
      }
    }
    if (!call) return {RepeatedCall::make(entry_->plan, args), &body_};
    call->take_arguments(args);  // outside the lock: other threads' loops take theirs meanwhile
    return {std::move(call), &body_};
  }

 private:
  void plan_for(const std::vector<Tensor>& args) {
    std::vector<bool> batching;
    for (const Tensor& a : args) batching.push_back(a.is_batched());
    if (!entry_ || batching != batching_) {
      entry_ = body_.plans->get(
          args,
          [this](const std::vector<Tensor>& symbolic) {
            const auto [carry, y] = body_.call(symbolic);
            return Traced{{carry, y}, std::any()};
          },
          false);
      batching_ = std::move(batching);
    }
  }

  const LoopBody& body_;
  std::shared_ptr<const CacheEntry> entry_;
  std::vector<bool> batching_;
};

// The body's ops are its own, per example, and computed (never deferred): not the ops of an
// enclosing trace or loop body.
struct BodyContext {
  SuspendCaptures own_ops;
  PerExampleScope per_example;
  DeferConstantOps computed{false};
};

// ---------------------------------------------------------------- scan

ExampleType scan_infer(std::span<const ExampleType> in, const Attrs& attrs) {
  const auto a = unpack_attrs<LoopAttrs>(attrs);
  const ExampleType& init = in[0];
  if (!is_floating(init.dtype) || init.shape != Shape{a.carry})
    fail("scan: the flat carry is {} of shape {}; expected a floating-point vector of {}", name_of(init.dtype),
         to_string(init.shape), a.carry);
  if (a.has_x && (in.size() < 2 || in[1].dtype != init.dtype || in[1].shape.size() != 2 || in[1].shape[0] != a.length))
    fail("scan: the flat xs do not match the loop ({} steps of {})", a.length, name_of(init.dtype));
  return {init.dtype, {a.length, a.carry + a.y}};
}

void scan_forward(const KernelArgs& k) {
  const LoopBody& body = body_of(k.attrs);
  const auto a = unpack_attrs<LoopAttrs>(k.attrs);
  const BodyContext context;
  BodyRunner run(body);
  const std::size_t first_lifted = a.has_x ? 2 : 1;
  std::vector<Tensor> args(body.params.size() + body.lifted.size());
  args[1] = tensor_of(k, k.in[0]);
  for (std::size_t i = 0; i < body.lifted.size(); ++i)
    args[body.params.size() + i] = tensor_of(k, k.in[first_lifted + i]);
  // Once a step maps the carry to one of the same batching, the steps run on a recorded plan's own buffers where
  // the backend records it: the carry stays there from step to step, the lifted inputs are written once.
  TakenCall fast;
  bool tried = false;
  bool carry_batched = false, y_batched = false, x_batched = false;
  const DType dtype = k.in[0].dtype;
  const auto buffer = [&](const void* data, std::int64_t n, bool batched) {
    return batched_view(dtype, const_cast<void*>(data), {n}, batched, k.batch, k.batched);
  };
  // The fast steps' views, made once: step t moves the x and output rows' data by t rows.
  View x_row, x_to, carry_from, carry_to, carry_out, y_from, y_out;
  const auto move = [](View& v, const View& first, std::int64_t rows, std::int64_t row_bytes) {
    v.data = static_cast<char*>(first.data) + rows * row_bytes;
  };
  const std::int64_t x_row_bytes = a.has_x ? k.in[1].strides[k.lead()] * static_cast<std::int64_t>(size_of(dtype)) : 0;
  const std::int64_t out_row_bytes = k.out.strides[k.lead()] * static_cast<std::int64_t>(size_of(dtype));
  const View x_first = a.has_x ? at(k, k.in[1], 0, 0) : View{}, out_first = at(k, k.out, 0, 0);
  const View carry_out_first = columns(out_first, 0, a.carry), y_out_first = columns(out_first, a.carry, a.y);
  for (std::int64_t s = 0; s < a.length; ++s) {
    const std::int64_t t = a.reverse ? a.length - 1 - s : s;
    if (fast) {
      if (auto* index = static_cast<std::int64_t*>(fast->argument(0))) *index = a.first_index + t;
      if (x_to.data) {
        move(x_row, x_first, t, x_row_bytes);
        k.backend.copy(x_row, x_to);
      }
      fast->run();
      move(carry_out, carry_out_first, t, out_row_bytes);
      k.backend.copy(carry_from, carry_out);
      if (a.y > 0) {
        move(y_out, y_out_first, t, out_row_bytes);
        k.backend.copy(y_from, y_out);
      }
      if (carry_to.data) k.backend.copy(carry_from, carry_to);
      continue;
    }
    const View row = at(k, k.out, 0, t);
    args[0] = Tensor::from_ints({a.first_index + t}, {}, DType::i64, k.backend.device());
    if (a.has_x) args[2] = tensor_of(k, at(k, k.in[1], 0, t));
    const std::vector<Tensor> out = run(args);
    write(k, out[0], columns(row, 0, a.carry));
    write(k, out[1], columns(row, a.carry, a.y));
    const bool stable = out[0].is_batched() == args[1].is_batched();
    args[1] = out[0];
    if (stable && s + 1 < a.length && !tried) {
      tried = true;  // once: a plan not recorded now is not recorded later
      carry_batched = out[0].is_batched();
      y_batched = out[1].is_batched();
      x_batched = a.has_x && args[2].is_batched();
      fast = run.repeated(args);
      if (fast) {
        if (void* x = a.has_x ? fast->argument(2) : nullptr) {
          x_row = x_first;
          x_to = buffer(x, k.in[1].shape.back(), x_batched);
        }
        carry_from = buffer(fast->result(0), a.carry, carry_batched);
        carry_out = carry_out_first;
        y_from = buffer(fast->result(1), a.y, y_batched);
        y_out = y_out_first;
        if (void* carry = fast->argument(1)) carry_to = buffer(carry, a.carry, carry_batched);
      }
    }
  }
}

std::vector<Tensor> scan_adjoint(const Node& node, const Tensor& out, const Tensor& gout,
                                 const AdjointContext& context);
Tensor scan_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents);

const OpDef scan_op{.name = "scan",
                    .inputs = OpDef::any_inputs,
                    .infer = scan_infer,
                    .forward = scan_forward,
                    .adjoint = scan_adjoint,
                    .tangent = scan_tangent,
                    .mixed_dtypes = true,
                    .integers = true,
                    .booleans = true,
                    .runs_functions = true,
                    .calls_per_run = [](const Attrs& attrs) {
                      return unpack_attrs<LoopAttrs>(attrs).length * std::max<std::int64_t>(body_of(attrs).kernels, 1);
                    }};

// The zeros of a vector of n, batched when `like` is.
Tensor zero_vector(std::int64_t n, const Tensor& like) { return zeros({n}, like.dtype(), like.device()); }

// Marks in `read` the columns of the loop's rows [T, carry + y] that the differentiated program reads, where `v` holds
// the rows' columns [base, base + v's last axis): through the unit-step slices and the reshapes that keep the last axis
// (which keep each element's column), as a loop's results are unpacked; any other reader reads all of v's columns.
void mark_read(const Tensor& v, std::int64_t base, const std::function<std::vector<Tensor>(const Tensor&)>& readers,
               std::vector<bool>& read) {
  const std::int64_t width = v.ndim() == 0 ? 1 : v.shape(-1);
  for (const Tensor& r : readers(v)) {
    const auto window = unit_slice_window(r);
    if (window && window->axis == static_cast<std::int64_t>(v.ndim()) - 1) {
      mark_read(r, base + window->start, readers, read);
    } else if (window || (r.defined() && r.impl().node->op == &reshape_op && r.ndim() > 0 && v.ndim() > 0 &&
                          r.shape(-1) == width)) {
      mark_read(r, base, readers, read);
    } else {
      const auto end = std::min(base + width, static_cast<std::int64_t>(read.size()));
      if (base < end) std::fill(read.begin() + base, read.begin() + end, true);
    }
  }
}

// The columns [lo, hi) of the runs where `wanted` holds, in order.
std::vector<std::pair<std::int64_t, std::int64_t>> runs(const std::vector<bool>& wanted) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  const auto n = static_cast<std::int64_t>(wanted.size());
  for (std::int64_t i = 0; i < n;) {
    if (!wanted[static_cast<std::size_t>(i)]) {
      ++i;
      continue;
    }
    std::int64_t j = i;
    while (j < n && wanted[static_cast<std::size_t>(j)]) ++j;
    out.emplace_back(i, j);
    i = j;
  }
  return out;
}

// The parts of a body's flat result `flat` (a vector) covering the columns where `wanted` holds, each with its
// cotangent from `ct`: of the tensors the body joined (concatenate), the ones a run of columns covers and slices of
// the ones it covers in part, so that a backward pass from them never reaches the ones left out.
void wanted_parts(const Tensor& flat, const Tensor& ct, const std::vector<bool>& wanted, std::vector<Tensor>& parts,
                  std::vector<Tensor>& cts) {
  std::vector<std::int64_t> bounds{0};  // the joined tensors' offsets, and the end
  const Node* joined = flat.impl().node ? flat.impl().node.get() : nullptr;
  if (joined && joined->op == &concatenate_op)
    for (const Tensor& in : joined->inputs) bounds.push_back(bounds.back() + in.numel());
  if (bounds.size() == 1) bounds.push_back(flat.numel());  // one piece: flat itself
  for (const auto& [lo, hi] : runs(wanted))
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
      const std::int64_t from = std::max(lo, bounds[i]), to = std::min(hi, bounds[i + 1]);
      if (from >= to) continue;
      const Tensor& piece = joined && joined->op == &concatenate_op ? joined->inputs[i] : flat;
      parts.push_back(slice(reshape(piece, {piece.numel()}), 0, from - bounds[i], to - bounds[i]));
      cts.push_back(slice(ct, 0, from, to));
    }
}

// The columns of `input` (a vector, one of the body's arguments `args`) that the computation of `outs` from `args`
// reads: through its unit-step slices; any other reader reads all of it.
std::vector<bool> columns_read(const std::vector<Tensor>& outs, const Tensor& input, const std::vector<Tensor>& args) {
  std::vector<bool> read(static_cast<std::size_t>(input.numel()), false);
  PointerSet seen;
  for (const Tensor& a : args) seen.insert(&a.impl());  // the walk stops at the body's arguments
  std::vector<Tensor> stack(outs);
  for (const Tensor& o : outs)
    if (&o.impl() == &input.impl()) std::fill(read.begin(), read.end(), true);  // returned as it came
  while (!stack.empty()) {
    const Tensor t = stack.back();
    stack.pop_back();
    if (!t.impl().tracked || !t.impl().node || !seen.insert(&t.impl())) continue;
    for (const Tensor& in : t.impl().node->inputs) {
      if (&in.impl() == &input.impl()) {
        const auto window = unit_slice_window(t);
        std::fill(read.begin() + (window ? window->start : 0), window ? read.begin() + window->stop : read.end(), true);
      }
      stack.push_back(in);
    }
  }
  return read;
}

// The cotangent of a loop's initial carry `init` from `g`, where only the columns in `live` (all where empty) matter:
// a tensor the initial carry joins whose columns are all dead gets none (not zeros, which would meet 0 x inf on the
// way to it).
Tensor init_cotangent(const Tensor& g, const Tensor& init, const std::vector<bool>& live) {
  if (live.empty()) return g;
  if (std::find(live.begin(), live.end(), true) == live.end()) return Tensor();
  const Node* joined = init.impl().node.get();
  if (!joined || joined->op != &concatenate_op) return g;
  std::vector<Tensor> pieces;
  std::int64_t start = 0;
  for (const Tensor& in : joined->inputs) {
    const std::int64_t stop = start + in.numel();
    const bool dead = std::find(live.begin() + start, live.begin() + stop, true) == live.begin() + stop;
    pieces.push_back(dead ? no_cotangent(in) : slice(g, 0, start, stop));
    start = stop;
  }
  return concatenate_pieces(pieces, 0);
}

// The adjoint: the pullback of each step, from the last to the first, is a scan of its own whose
// carry is the carry's cotangent followed by the lifted inputs' cotangents summed so far, and whose
// x at step t is {carry before step t, x_t, the output row's cotangent}.
std::vector<Tensor> scan_adjoint(const Node& node, const Tensor& out, const Tensor& gout,
                                 const AdjointContext& context) {
  const auto a = unpack_attrs<LoopAttrs>(node.attrs);
  const auto fwd = std::static_pointer_cast<const LoopBody>(node.attrs.object);
  const Tensor& init = node.inputs[0];
  const std::size_t first_lifted = a.has_x ? 2 : 1;
  const std::vector<Tensor> lifted(node.inputs.begin() + static_cast<std::ptrdiff_t>(first_lifted), node.inputs.end());
  const std::int64_t T = a.length, Cc = a.carry, Cy = a.y, Cx = a.has_x ? node.inputs[1].shape(1) : 0;
  // Offsets of the floating-point lifted inputs' cotangents in the reverse carry (-1: none).
  std::vector<std::int64_t> offsets;
  std::int64_t size = Cc;
  for (const Tensor& l : lifted) {
    const bool gets = is_floating(l.dtype()) && l.dtype() == init.dtype();
    offsets.push_back(gets ? size : -1);
    if (gets) size += l.numel();
  }
  // Carries before each step, in step order.
  const Tensor row_carries = slice(out, 1, 0, Cc);
  const Tensor first = reshape(init, {1, Cc});
  Tensor before = T == 1      ? first
                  : a.reverse ? concatenate({slice(row_carries, 0, 1, T), first}, 0)
                              : concatenate({first, slice(row_carries, 0, 0, T - 1)}, 0);
  std::vector<Tensor> columns_of_x{before};
  if (a.has_x) columns_of_x.push_back(node.inputs[1]);
  columns_of_x.push_back(gout);
  const Tensor xb = concatenate(columns_of_x, 1);
  const bool differentiable = context.differentiated;
  // The columns of the rows that the differentiated program reads. A carry that nothing reads, directly or through
  // the ys and the carries it feeds, is left out of the pullback (as JAX's scan drops it): its zero cotangent would
  // meet 0 x inf where the body's derivative is infinite (sqrt at 0) and spread NaN to the rest.
  std::vector<bool> read(static_cast<std::size_t>(Cc + Cy), context.readers == nullptr);
  if (context.readers) mark_read(out, 0, *context.readers, read);
  const bool reads_all = std::find(read.begin(), read.end(), false) == read.end();
  const std::vector<bool> carry_read(read.begin(), read.begin() + Cc), y_read(read.begin() + Cc, read.end());
  const auto live_carry = std::make_shared<std::vector<bool>>();  // the pullback's finding, when not every column

  FlatBody pullback = [fwd, lifted, offsets, Cc, Cy, Cx, has_x = a.has_x, differentiable, reads_all, carry_read, y_read,
                       live_carry](const std::vector<Tensor>& args) {
    const Tensor& cb = args[1];
    const Tensor& xrow = args[2];
    const Tensor ct_carry = slice(cb, 0, 0, Cc);
    const Tensor g_carry = slice(xrow, 0, Cc + Cx, Cc + Cx + Cc), g_y = slice(xrow, 0, Cc + Cx + Cc, Cc + Cx + Cc + Cy);
    TransformScope scope;
    std::vector<Tensor> fwd_args{args[0], watch(slice(xrow, 0, 0, Cc))};
    if (has_x) fwd_args.push_back(watch(slice(xrow, 0, Cc, Cc + Cx)));
    std::vector<Tensor> wrt(fwd_args.begin() + 1, fwd_args.end());
    for (std::size_t i = 0; i < lifted.size(); ++i) {
      fwd_args.push_back(offsets[i] >= 0 ? watch(lifted[i]) : lifted[i]);
      if (offsets[i] >= 0) wrt.push_back(fwd_args.back());
    }
    const auto [carry, y] = fwd->call(fwd_args);
    // The seeds are this body's arguments, recorded unbatched but per example when a step runs
    // (batched or not). backward() would spread one seeding a batched output over the batch with
    // broadcast_to_batch, whose adjoint sums over the batch (right for a value every example shares,
    // wrong here): reverse over reverse would add up the examples' cotangents. Adding a batched zero
    // makes the seed batched with a per-example adjoint (needed only if this pullback is differentiated).
    const auto per_example = [differentiable](const Tensor& ct, const Tensor& out) {
      if (!differentiable || ct.is_batched() || !out.is_batched()) return ct;
      return ct + broadcast_to_batch(zeros(ct.shape(), ct.dtype(), ct.device()), stop_gradient(out));
    };
    std::vector<Tensor> outs, cts;
    if (reads_all) {
      outs.push_back(carry);
      cts.push_back(per_example(g_carry + ct_carry, carry));
      if (Cy > 0) {
        outs.push_back(y);
        cts.push_back(per_example(g_y, y));
      }
    } else {
      // The carry's live columns: those read, and those that feed them or the ys read in a later step (a fixed
      // point of the body's dependences, at the granularity of the tensors it joins).
      std::vector<bool> live = carry_read;
      std::vector<Tensor> parts, part_cts;
      const Tensor carry_ct = g_carry + ct_carry;
      for (;;) {
        parts.clear();
        part_cts.clear();
        wanted_parts(carry, carry_ct, live, parts, part_cts);
        if (Cy > 0) wanted_parts(y, g_y, y_read, parts, part_cts);
        std::vector<bool> next = columns_read(parts, fwd_args[1], fwd_args);
        for (std::size_t c = 0; c < next.size(); ++c) next[c] = next[c] || carry_read[c];
        if (next == live) break;
        live = std::move(next);
      }
      *live_carry = live;
      for (std::size_t i = 0; i < parts.size(); ++i) {
        outs.push_back(parts[i]);
        cts.push_back(per_example(part_cts[i], parts[i]));
      }
    }
    const std::vector<Tensor> grads = backward(outs, cts, wrt, differentiable);
    std::vector<Tensor> next{grads[0]};
    std::size_t g = has_x ? 2 : 1;
    for (std::size_t i = 0; i < lifted.size(); ++i) {
      if (offsets[i] < 0) continue;
      const std::int64_t n = lifted[i].numel();
      next.push_back(slice(cb, 0, offsets[i], offsets[i] + n) + reshape(grads[g++], {n}));
    }
    return std::pair<Tensor, Tensor>{concatenate(next, 0), has_x ? grads[1] : zero_vector(0, cb)};
  };
  const Tensor back = scan_flat(pullback, zero_vector(size, init), xb, T, a.first_index, !a.reverse, "scan");
  const std::int64_t last = a.reverse ? T - 1 : 0;  // the pullback's final step
  const Tensor final_carry = reshape(slice(slice(back, 0, last, last + 1), 1, 0, size), {size});
  std::vector<Tensor> grads{context.needs[0] ? init_cotangent(slice(final_carry, 0, 0, Cc), init, *live_carry)
                                             : Tensor()};
  if (a.has_x) grads.push_back(context.needs[1] ? slice(back, 1, size, size + Cx) : Tensor());
  for (std::size_t i = 0; i < lifted.size(); ++i)
    grads.push_back(
        offsets[i] < 0 || !context.needs[first_lifted + i]
            ? Tensor()
            : reshape(slice(final_carry, 0, offsets[i], offsets[i] + lifted[i].numel()), lifted[i].shape()));
  return grads;
}

// The body's arguments for a jvp of it: {step, carry, x when there are xs, lifted...} with the
// carry, x and each lifted input that has a tangent watched; `wrt` gets the watched ones and
// `tangents` theirs. The carry and x arrive as [value, tangent] halves of one vector.
struct JvpArguments {
  std::vector<Tensor> args, wrt, tangents;
  void add(const Tensor& value, const Tensor& tangent) {
    if (!tangent.defined()) {
      args.push_back(value);
      return;
    }
    args.push_back(watch(value));
    wrt.push_back(args.back());
    tangents.push_back(tangent);
  }
  void add_halves(const Tensor& both, std::int64_t n) { add(slice(both, 0, 0, n), slice(both, 0, n, 2 * n)); }
};

// The tangent: a scan of the body's jvp, whose carry is {carry, its tangent} and whose x at step t
// is {x_t, its tangent}; the lifted inputs' tangents are read from outside (so they become its own
// lifted inputs). Its rows are {carry, tangent, y, tangent}; the tangents' columns are the result's.
Tensor scan_tangent(const Node& node, const Tensor& out, const std::vector<Tensor>& tangents) {
  const auto a = unpack_attrs<LoopAttrs>(node.attrs);
  const auto fwd = std::static_pointer_cast<const LoopBody>(node.attrs.object);
  const Tensor& init = node.inputs[0];
  const std::size_t first_lifted = a.has_x ? 2 : 1;
  const std::int64_t T = a.length, Cc = a.carry, Cy = a.y, Cx = a.has_x ? node.inputs[1].shape(1) : 0;
  const auto or_zeros = [](const Tensor& t, const Tensor& like) {
    return t.defined() ? t : zeros(like.shape(), like.dtype(), like.device());
  };
  const std::vector<Tensor> lifted(node.inputs.begin() + static_cast<std::ptrdiff_t>(first_lifted), node.inputs.end());
  const std::vector<Tensor> lifted_tangents(tangents.begin() + static_cast<std::ptrdiff_t>(first_lifted),
                                            tangents.end());
  FlatBody jvp_body = [fwd, lifted, lifted_tangents, Cc, Cx, has_x = a.has_x](const std::vector<Tensor>& args) {
    TransformScope scope;
    JvpArguments in;
    in.add(args[0], Tensor());
    in.add_halves(args[1], Cc);
    if (has_x) in.add_halves(args[2], Cx);
    for (std::size_t i = 0; i < lifted.size(); ++i) in.add(lifted[i], lifted_tangents[i]);
    const auto [carry, y] = fwd->call(in.args);
    const std::vector<Tensor> pushed = push_forward({carry, y}, in.wrt, in.tangents);
    return std::pair<Tensor, Tensor>{concatenate({carry, pushed[0]}, 0), concatenate({y, pushed[1]}, 0)};
  };
  const Tensor both_init = concatenate({init, or_zeros(tangents[0], init)}, 0);
  const Tensor both_xs = a.has_x ? concatenate({node.inputs[1], or_zeros(tangents[1], node.inputs[1])}, 1) : Tensor();
  const Tensor rows = scan_flat(jvp_body, both_init, both_xs, T, a.first_index, a.reverse, "scan");
  return concatenate({slice(rows, 1, Cc, 2 * Cc), slice(rows, 1, 2 * Cc + Cy, 2 * Cc + 2 * Cy)}, 1);
}

// ---------------------------------------------------------------- while

ExampleType while_infer(std::span<const ExampleType> in, const Attrs& attrs) {
  const auto a = unpack_attrs<LoopAttrs>(attrs);
  if (!is_floating(in[0].dtype) || in[0].shape != Shape{a.carry})
    fail("while_loop: the flat carry is {} of shape {}; expected a floating-point vector of {}", name_of(in[0].dtype),
         to_string(in[0].shape), a.carry);
  return in[0];
}

// Whether any example's state goes on: its element 0 (while_flat's predicate) is nonzero.
bool any_goes_on(const Tensor& state) {
  for (const double p : slice(state, 0, 0, 1).to_vector<double>())
    if (p != 0) return true;
  return false;
}

// Steps while any example's state goes on. A step never runs on a state whose predicate is false, unless another
// example of the batch goes on (it then keeps its state: the step selects).
void while_forward(const KernelArgs& k) {
  const LoopBody& body = body_of(k.attrs);
  const BodyContext context;
  BodyRunner run(body);
  std::vector<Tensor> args(body.params.size() + body.lifted.size());
  args[1] = tensor_of(k, k.in[0]);
  for (std::size_t i = 0; i < body.lifted.size(); ++i) args[body.params.size() + i] = tensor_of(k, k.in[1 + i]);
  for (std::int64_t t = 0; any_goes_on(args[1]); ++t) {
    args[0] = Tensor::from_ints({t}, {}, DType::i64, k.backend.device());
    args[1] = run(args)[0];
  }
  write(k, args[1], k.out);
}

Tensor while_steps(FlatBody step, const Tensor& state);

std::vector<Tensor> while_adjoint(const Node&, const Tensor&, const Tensor&, const AdjointContext&) {
  fail(
      "while_loop: cannot be differentiated in reverse mode (its number of steps is known only when it has run, so "
      "its carries cannot be stored ahead); use fori_loop or scan with a fixed number of steps, or forward mode (jvp), "
      "which needs no stored carries");
}

// Forward mode needs no stored carries: a while loop of the body's jvp over {carry, its tangent}
// (the body's step selects between the two, so a finished loop's tangent stays too).
Tensor while_tangent(const Node& node, const Tensor&, const std::vector<Tensor>& tangents) {
  const auto a = unpack_attrs<LoopAttrs>(node.attrs);
  const auto fwd = std::static_pointer_cast<const LoopBody>(node.attrs.object);
  const Tensor& init = node.inputs[0];
  const std::int64_t Cc = a.carry;
  const std::vector<Tensor> lifted(node.inputs.begin() + 1, node.inputs.end());
  const std::vector<Tensor> lifted_tangents(tangents.begin() + 1, tangents.end());
  FlatBody jvp_step = [fwd, lifted, lifted_tangents, Cc](const std::vector<Tensor>& args) {
    TransformScope scope;
    JvpArguments in;
    in.add(args[0], Tensor());
    in.add_halves(args[1], Cc);
    for (std::size_t i = 0; i < lifted.size(); ++i) in.add(lifted[i], lifted_tangents[i]);
    const auto [carry, go_on] = fwd->call(in.args);
    const Tensor pushed = push_forward({carry}, in.wrt, in.tangents)[0];
    return std::pair<Tensor, Tensor>{concatenate({carry, pushed}, 0), go_on};
  };
  const Tensor tangent = tangents[0].defined() ? tangents[0] : zeros(init.shape(), init.dtype(), init.device());
  return slice(while_steps(jvp_step, concatenate({init, tangent}, 0)), 0, Cc, 2 * Cc);
}

const OpDef while_op{.name = "while_loop",
                     .inputs = OpDef::any_inputs,
                     .infer = while_infer,
                     .forward = while_forward,
                     .adjoint = while_adjoint,
                     .tangent = while_tangent,
                     .mixed_dtypes = true,
                     .integers = true,
                     .booleans = true,
                     .runs_functions = true};

}  // namespace

namespace {

// A scan's body recorded on arguments like init's and xs' rows, and checked.
std::shared_ptr<LoopBody> record_scan_body(const FlatBody& fn, const Tensor& init, const Tensor& xs,
                                           std::int64_t length, const char* name) {
  if (length < 0) fail("{}: a loop of {} steps", name, length);
  if (xs.defined() && (xs.ndim() != 2 || xs.shape(0) != length))
    fail("{}: xs of shape {} for a loop of {} steps", name, to_string(xs.shape()), length);
  std::vector<Tensor> like{symbolic(DType::i64, {}, init.device()), init};
  if (xs.defined()) like.push_back(symbolic(xs.dtype(), {xs.shape(1)}, xs.device()));
  std::shared_ptr<LoopBody> body = record(fn, like);
  const Tensor &carry = body->carry, &y = body->y;
  if (carry.shape() != init.shape() || carry.dtype() != init.dtype())
    fail("{}: the body returns a carry of {} {}, not the {} {} it was given", name, name_of(carry.dtype()),
         to_string(carry.shape()), name_of(init.dtype()), to_string(init.shape()));
  if (y.ndim() != 1 || y.dtype() != init.dtype())
    fail("{}: the body's y is {} {}; the loop's tensors share the carry's dtype, {}", name, name_of(y.dtype()),
         to_string(y.shape()), name_of(init.dtype()));
  return body;
}

}  // namespace

Tensor scan_flat(FlatBody fn, const Tensor& init, const Tensor& xs, std::int64_t length, std::int64_t first_index,
                 bool reverse, const char* name) {
  if (length == 0) fail("{}: scan_flat of no steps (scan_results gives the carry and no ys)", name);
  const std::shared_ptr<LoopBody> body = record_scan_body(fn, init, xs, length, name);
  const Tensor& y = body->y;
  std::vector<Tensor> inputs{init};
  if (xs.defined()) inputs.push_back(xs);
  inputs.insert(inputs.end(), body->lifted.begin(), body->lifted.end());
  Attrs attrs = pack_attrs(LoopAttrs{length, init.numel(), y.numel(), xs.defined(), reverse, first_index});
  attrs.object = body;
  return apply(scan_op, std::move(inputs), std::move(attrs));
}

std::pair<Tensor, Tensor> scan_results(const FlatBody& body, const Tensor& init, const Tensor& xs, std::int64_t length,
                                       std::int64_t first_index, bool reverse, std::int64_t every, const char* name) {
  if (every < 0) fail("{}: checkpoint_every is {}; it must be positive (or 0: no checkpoints)", name, every);
  const std::int64_t Cc = init.numel();
  if (length == 0) {  // the carry as it was, and no ys; the body is recorded all the same, for its ys' shapes
    const std::int64_t Cy = record_scan_body(body, init, xs, length, name)->y.numel();
    const Tensor ys = zeros({0, Cy}, init.dtype(), init.device());
    const Tensor* batched = init.is_batched() ? &init : xs.defined() && xs.is_batched() ? &xs : nullptr;
    return {init, batched ? broadcast_to_batch(ys, *batched) : ys};
  }
  // The final carry of a part's rows [count, Cc + Cy] (its last step's row: the first when reversed).
  const auto final_carry = [reverse, Cc](const Tensor& rows) {
    const std::int64_t last = reverse ? 0 : rows.shape(0) - 1;
    return reshape(slice(slice(rows, 0, last, last + 1), 1, 0, Cc), {Cc});
  };
  if (every == 0) {
    const Tensor rows = scan_flat(body, init, xs, length, first_index, reverse, name);
    return {final_carry(rows), slice(rows, 1, Cc, rows.shape(1))};
  }
  const std::int64_t segments = length / every, rest = length - segments * every;
  const std::int64_t Cx = xs.defined() ? xs.shape(1) : 0;
  // `count` steps from `carry`, the body seeing the step index shifted by `offset` (an int64 scalar).
  const auto steps = [body, first_index, reverse, name](const Tensor& carry, const Tensor& part_xs, std::int64_t count,
                                                        const Tensor& offset) {
    FlatBody shifted = [body, offset](const std::vector<Tensor>& args) {
      std::vector<Tensor> moved = args;
      moved[0] = args[0] + offset;
      return body(moved);
    };
    return scan_flat(std::move(shifted), carry, part_xs, count, first_index, reverse, name);
  };
  const auto index = [&](std::int64_t i) { return Tensor::from_ints({i}, {}, DType::i64, init.device()); };
  const auto run_segments = [&](const Tensor& from) {
    FlatBody segment = [steps, final_carry, every, Cc, Cx, has_x = xs.defined()](const std::vector<Tensor>& args) {
      const Tensor rows = steps(args[1], has_x ? reshape(args[2], {every, Cx}) : Tensor(), every, args[0] * every);
      const Tensor ys = slice(rows, 1, Cc, rows.shape(1));
      return std::pair<Tensor, Tensor>{final_carry(rows), reshape(ys, {ys.numel()})};
    };
    const Tensor segment_xs =
        xs.defined() ? reshape(slice(xs, 0, 0, segments * every), {segments, every * Cx}) : Tensor();
    const Tensor rows = scan_flat(std::move(segment), from, segment_xs, segments, 0, reverse, name);
    const Tensor ys = slice(rows, 1, Cc, rows.shape(1));
    return std::pair<Tensor, Tensor>{final_carry(rows), reshape(ys, {segments * every, ys.shape(1) / every})};
  };
  const auto run_rest = [&](const Tensor& from) {
    const Tensor rows =
        steps(from, xs.defined() ? slice(xs, 0, segments * every, length) : Tensor(), rest, index(segments * every));
    return std::pair<Tensor, Tensor>{final_carry(rows), slice(rows, 1, Cc, rows.shape(1))};
  };
  if (segments == 0) return run_rest(init);
  if (rest == 0) return run_segments(init);
  // The steps left are the last ones: run after the segments, or first when reversed.
  if (!reverse) {
    const auto [carry, ys] = run_segments(init);
    const auto [last, ys_rest] = run_rest(carry);
    return {last, concatenate({ys, ys_rest}, 0)};
  }
  const auto [carry, ys_rest] = run_rest(init);
  const auto [last, ys] = run_segments(carry);
  return {last, concatenate({ys, ys_rest}, 0)};
}

namespace {

// The while op: `step` (index, state) -> {next state, anything} runs while element 0 of the state is nonzero.
Tensor while_steps(FlatBody step, const Tensor& state) {
  const std::shared_ptr<LoopBody> body = record(step, {symbolic(DType::i64, {}, state.device()), state});
  std::vector<Tensor> inputs{state};
  inputs.insert(inputs.end(), body->lifted.begin(), body->lifted.end());
  Attrs attrs = pack_attrs(LoopAttrs{1, state.numel(), 0, false, false, 0});
  attrs.object = body;
  return apply(while_op, std::move(inputs), std::move(attrs));
}

}  // namespace

Tensor while_flat(const FlatMap& cond, const FlatMap& body, const Tensor& init) {
  const std::int64_t n = init.numel();
  // The state is {c's predicate as 1 or 0, c}: the loop stops before a step on a state whose predicate is false, so
  // the body never sees the state it exits with.
  const auto truth = [&cond](const Tensor& c) {
    const Tensor p = cond(c);
    check_predicate(p, "while_loop");
    return reshape(where(p, ones({}, c.dtype(), c.device()), zeros({}, c.dtype(), c.device())), {1});
  };
  FlatBody step = [truth, body, n](const std::vector<Tensor>& a) {
    const Tensor go_on = slice(a[1], 0, 0, 1), c = slice(a[1], 0, 1, n + 1);
    const Tensor moved = body(c);
    if (moved.shape() != c.shape() || moved.dtype() != c.dtype())
      fail("while_loop: the body returns a flat carry of {} {}, not the {} {} it was given", name_of(moved.dtype()),
           to_string(moved.shape()), name_of(c.dtype()), to_string(c.shape()));
    const Tensor next = where(go_on, moved, c);
    const Tensor next_goes_on = truth(next);
    return std::pair<Tensor, Tensor>{concatenate({next_goes_on, next}, 0), next_goes_on};
  };
  return slice(while_steps(std::move(step), concatenate({truth(init), init}, 0)), 0, 1, n + 1);
}

// ---------------------------------------------------------------- structures <-> flat vectors

Tensor pack(const std::vector<Tensor>& leaves, DType dtype, Device device, const char* name, const char* what) {
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].dtype() != dtype)
      fail("{}: {} {} is {}; a loop's carry, xs and ys share one floating-point dtype ({})", name, what, i,
           name_of(leaves[i].dtype()), name_of(dtype));
    parts.push_back(reshape(leaves[i], {leaves[i].numel()}));
  }
  if (parts.empty()) return zeros({0}, dtype, device);
  return parts.size() == 1 ? parts[0] : concatenate(parts, 0);
}

Tensor pack_rows(const std::vector<Tensor>& leaves, std::int64_t length, DType dtype, const char* name) {
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    if (leaves[i].dtype() != dtype)
      fail("{}: xs {} is {}; a loop's carry, xs and ys share one floating-point dtype ({})", name, i,
           name_of(leaves[i].dtype()), name_of(dtype));
    const Shape& shape = leaves[i].shape();
    parts.push_back(reshape(leaves[i], {length, numel(Shape(shape.begin() + 1, shape.end()))}));
  }
  return parts.size() == 1 ? parts[0] : concatenate(parts, 1);
}

std::vector<Tensor> unpack(const Tensor& flat, const std::vector<Shape>& shapes, std::int64_t rows) {
  std::vector<Tensor> leaves;
  const std::int64_t axis = rows < 0 ? 0 : 1;
  std::int64_t offset = 0;
  for (const Shape& s : shapes) {
    const std::int64_t n = numel(s);
    Shape shape = s;
    if (rows >= 0) shape.insert(shape.begin(), rows);
    leaves.push_back(reshape(slice(flat, axis, offset, offset + n), shape));
    offset += n;
  }
  return leaves;
}

std::vector<Shape> leaf_shapes(const std::vector<Tensor>& leaves, bool per_step) {
  std::vector<Shape> shapes;
  for (const Tensor& t : leaves) {
    Shape s = t.shape();
    if (per_step) s.erase(s.begin());
    shapes.push_back(s);
  }
  return shapes;
}

DType loop_dtype(const std::vector<Tensor>& carry, const char* name) {
  if (carry.empty()) fail("{}: the carry holds no tensor", name);
  const DType dtype = carry[0].dtype();
  if (!is_floating(dtype))
    fail(
        "{}: the carry's first tensor is {}; a loop's carry is floating-point (integer counters come from the step "
        "index)",
        name, name_of(dtype));
  return dtype;
}

std::int64_t loop_length(const std::vector<Tensor>& xs, const char* name) {
  if (xs.empty()) fail("{}: xs holds no tensor; pass a length instead", name);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].ndim() == 0) fail("{}: xs {} is a scalar; xs are scanned along their leading axis", name, i);
    if (xs[i].shape(0) != xs[0].shape(0))
      fail("{}: xs {} has {} steps along its leading axis, xs 0 has {}", name, i, xs[i].shape(0), xs[0].shape(0));
  }
  return xs[0].shape(0);
}

void check_leaves(const std::vector<Tensor>& got, const std::vector<Shape>& shapes, const char* name,
                  const char* what) {
  if (got.size() != shapes.size())
    fail("{}: the body returns {} {} tensors; expected {}", name, got.size(), what, shapes.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].shape() != shapes[i])
      fail("{}: the body returns {} {} of shape {}; expected {} (a loop keeps its shapes from step to step)", name,
           what, i, to_string(got[i].shape()), to_string(shapes[i]));
}

std::vector<Tensor> cond_flat(const Tensor& pred, const Branch& on_true, const Branch& on_false) {
  check_predicate(pred, "cond");
  bool value = false;
  if (concrete_predicate(pred, value)) return value ? on_true() : on_false();
  // Only tensors a derivative may reach are masked: tracked ones, and traced ones (a trace or a recorded loop body
  // may be differentiated).
  const auto run = [&pred](const Branch& branch, bool taken_when) {
    const CaptureScope masked([&pred, taken_when](const Tensor& x) {
      if (!is_floating(x.dtype()) || !(x.impl().tracked || (x.is_symbolic() && !x.impl().deferred))) return x;
      const Tensor held = stop_gradient(x);
      return taken_when ? where(pred, x, held) : where(pred, held, x);
    });
    return branch();
  };
  const std::vector<Tensor> a = run(on_true, true), b = run(on_false, false);
  if (a.size() != b.size()) fail("cond: the branches return {} and {} tensors; they must agree", a.size(), b.size());
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < a.size(); ++i) out.push_back(select_branch(pred, a[i], b[i]));
  return out;
}

Tensor select_branch(const Tensor& pred, const Tensor& on_true, const Tensor& on_false) {
  if (on_true.shape() != on_false.shape() || on_true.dtype() != on_false.dtype())
    fail("cond: the branches return {} {} and {} {}; they must agree", name_of(on_true.dtype()),
         to_string(on_true.shape()), name_of(on_false.dtype()), to_string(on_false.shape()));
  // Both branches forward the same tensor: it is the result as it is (unbatched stays unbatched under vmap).
  if (on_true.impl_ptr() == on_false.impl_ptr()) return on_true;
  return where(pred, on_true, on_false);
}

void check_predicate(const Tensor& pred, const char* name) {
  if (pred.ndim() != 0)
    fail("{}: the predicate has shape {}; it must be a scalar (per example)", name, to_string(pred.shape()));
}

bool concrete_predicate(const Tensor& pred, bool& value) {
  if (pred.is_symbolic() || pred.is_batched()) return false;
  value = pred.item<double>() != 0;
  return true;
}

// Under their names, for jit's plan text (core/graph.hpp).
VT_REGISTER_OP(scan_op, "scan", "length carry y has_x reverse first_index");
VT_REGISTER_OP(while_op, "while_loop", "length carry y has_x reverse first_index");

}  // namespace vt::detail
