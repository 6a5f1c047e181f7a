// vtape fuzzer: program generation (interleaved with the eager run, which is the reference) and
// the oracles listed in fuzz.hpp.
#include "fuzz.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fmt/format.h>
#include <functional>
#include <optional>
#include <random>
#include <typeinfo>

#include "program.hpp"

namespace vtfuzz {

using vt::DType;
using vt::Shape;
using vt::Tensor;

namespace {

// ------------------------------------------------------------------ crash reporting
std::string g_current_repro;  // prepared before each program runs
std::uint64_t g_current_seed = 0;

void crash_handler(int sig) {
  const char* what = sig == SIGALRM   ? "TIMEOUT (program hung)"
                     : sig == SIGSEGV ? "SIGSEGV"
                     : sig == SIGABRT ? "SIGABRT"
                                      : "SIGFPE/SIGBUS";
  char head[160];
  const int n = std::snprintf(head, sizeof head, "\nFAIL [crash] seed %llu: %s while running this program\n",
                              static_cast<unsigned long long>(g_current_seed), what);
  if (n > 0) (void)!write(2, head, static_cast<std::size_t>(n));
  (void)!write(2, g_current_repro.data(), g_current_repro.size());
  _exit(3);
}

// ------------------------------------------------------------------ random numbers
struct Rng {
  std::mt19937_64 g;
  explicit Rng(std::uint64_t s) : g(s * 0x9E3779B97F4A7C15ull + 12345) {}
  std::int64_t below(std::int64_t n) {
    return n <= 0 ? 0 : static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(n));
  }
  std::int64_t range(std::int64_t lo, std::int64_t hi) { return lo + below(hi - lo + 1); }
  double unif() { return static_cast<double>(g() >> 11) * 0x1.0p-53; }
  double normal() {
    const double u = std::max(unif(), 1e-300), v = unif();
    return std::sqrt(-2 * std::log(u)) * std::cos(6.283185307179586 * v);
  }
  bool chance(double p) { return unif() < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<std::size_t>(below(static_cast<std::int64_t>(v.size())))];
  }
};

enum class Vals { normal, smooth, positive, mask };

std::vector<double> gen_values(Rng& g, std::int64_t n, Vals kind, bool specials) {
  std::vector<double> v(static_cast<std::size_t>(n));
  static const std::vector<double> special{NAN,   INFINITY, -INFINITY, 0.0,  -0.0,  1e-310, -1e-310,
                                           1e300, -1e300,   1e-40,     88.0, 710.0, -1.0};
  const double scale = g.pick(std::vector<double>{1, 1, 1, 4, 1e-3});
  for (auto& x : v) {
    switch (kind) {
      case Vals::smooth: x = 2 * g.unif() - 1; break;
      case Vals::positive: x = 0.5 + 1.5 * g.unif(); break;
      case Vals::mask: x = g.chance(0.5) ? 1.0 : 0.0; break;
      case Vals::normal: x = scale * g.normal(); break;
    }
    if (specials && g.chance(0.25)) x = g.pick(special);
  }
  return v;
}

Shape gen_shape(Rng& g, int max_rank = 3, bool zeros = true) {
  const int rank = static_cast<int>(g.pick(std::vector<std::int64_t>{0, 1, 1, 2, 2, 2, 3, 3}));
  Shape s;
  for (int k = 0; k < std::min(rank, max_rank); ++k) {
    std::int64_t d = g.pick(std::vector<std::int64_t>{1, 1, 2, 2, 3, 3, 4, 5});
    if (zeros && g.chance(0.04)) d = 0;
    s.push_back(d);
  }
  while (numel(s) > 48) s.back() = 1;
  return s;
}

bool bcast_ok(const Shape& a, const Shape& b) {
  for (std::size_t k = 1; k <= std::min(a.size(), b.size()); ++k) {
    const auto x = a[a.size() - k], y = b[b.size() - k];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// A shape that broadcasts with s: a suffix of it, some axes set to 1.
Shape partner_shape(Rng& g, const Shape& s) {
  Shape t(s.begin() + g.below(static_cast<std::int64_t>(s.size()) + 1), s.end());
  for (auto& d : t)
    if (g.chance(0.3)) d = 1;
  return t;
}

// ------------------------------------------------------------------ comparisons
struct Snapshot {
  bool ok = false;
  std::string error;
  std::vector<Shape> shapes;
  std::vector<DType> dtypes;
  std::vector<bool> batched;
  std::vector<std::int64_t> batch;
  std::vector<std::vector<double>> values;
};

Snapshot snap(const std::vector<Tensor>& out) {
  Snapshot s;
  s.ok = true;
  for (const Tensor& t : out) {
    s.shapes.push_back(t.shape());
    s.dtypes.push_back(t.dtype());
    s.batched.push_back(t.is_batched());
    s.batch.push_back(t.is_batched() ? t.batch_size() : 0);
    s.values.push_back(t.to_vector<double>());
  }
  return s;
}

struct Mismatch {
  std::string text;
};

// Compares values: bitwise-equal (NaN == NaN) when tol == 0, else |a-b| <= tol * max(1, |a|, |b|, scale).
std::optional<Mismatch> compare_values(const std::vector<double>& a, const std::vector<double>& b, double tol,
                                       const std::string& where) {
  if (a.size() != b.size()) return Mismatch{fmt::format("{}: {} vs {} elements", where, a.size(), b.size())};
  double scale = 1;
  for (std::size_t k = 0; k < a.size(); ++k)
    if (std::isfinite(a[k])) scale = std::max(scale, std::abs(a[k]));
  std::optional<Mismatch> first;
  for (std::size_t k = 0; k < a.size(); ++k) {
    const double x = a[k], y = b[k];
    bool same;
    // Reassociated matmul chains (jit's plan) may turn an Inf into a NaN or back: with a
    // tolerance, any non-finite value matches any other (a finite one never matches either).
    if (tol > 0 && (!std::isfinite(x) || !std::isfinite(y))) same = !std::isfinite(x) && !std::isfinite(y);
    else if (std::isnan(x) || std::isnan(y)) same = std::isnan(x) && std::isnan(y);
    else if (tol == 0) same = std::memcmp(&x, &y, sizeof x) == 0 || (x == y && x != 0);
    else if (!std::isfinite(x) || !std::isfinite(y)) same = x == y;
    else same = std::abs(x - y) <= tol * scale;
    if (!same) {
      if (!first) first = Mismatch{fmt::format("{}: element {}: {} vs {}", where, k, num(x), num(y))};
    }
  }
  return first;
}

std::optional<Mismatch> compare(const Snapshot& a, const Snapshot& b, double tol, const std::string& what) {
  if (a.values.size() != b.values.size())
    return Mismatch{fmt::format("{}: {} vs {} outputs", what, a.values.size(), b.values.size())};
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    if (a.shapes[k] != b.shapes[k] || a.dtypes[k] != b.dtypes[k] || a.batched[k] != b.batched[k] ||
        a.batch[k] != b.batch[k])
      return Mismatch{fmt::format("{}: output {}: shape {} {}{} vs {} {}{}", what, k, shape_text(a.shapes[k]),
                                  vt::name_of(a.dtypes[k]), a.batched[k] ? fmt::format(" batch {}", a.batch[k]) : "",
                                  shape_text(b.shapes[k]), vt::name_of(b.dtypes[k]),
                                  b.batched[k] ? fmt::format(" batch {}", b.batch[k]) : "")};
    const double t = tol == 0 ? 0 : (a.dtypes[k] == DType::f32 ? 2e-5 : tol);
    if (auto m = compare_values(a.values[k], b.values[k], t, fmt::format("{}: output {}", what, k))) return m;
  }
  return std::nullopt;
}

// ------------------------------------------------------------------ generation
struct RegInfo {
  bool usable = true;
  bool positive = false;
  bool spd = false;    // SPD matrices [..., n, n]
  bool lower = false;  // lower-triangular factor
};

struct Gen {
  Rng& g;
  const std::string& mode;
  const Options& opt;
  const std::vector<Tensor>& R;
  const std::vector<RegInfo>& info;
  std::vector<Instr> out;
  std::vector<RegInfo> out_info;
  std::vector<Shape> out_shapes;  // shapes of the constants emitted this step

  bool smooth() const { return mode == "smooth"; }
  bool general() const { return mode == "general" || mode == "batch"; }
  bool allowed(const char* cat) const { return !opt.skip.count(cat); }

  int emit(Instr in, RegInfo ri = {}, Shape shape = {}) {
    out.push_back(std::move(in));
    out_info.push_back(ri);
    out_shapes.push_back(std::move(shape));
    return static_cast<int>(R.size() + out.size() - 1);
  }
  int constant(const Shape& s, Vals kind, DType dt = DType::f64) {
    Instr c{Op::Const};
    c.i = s;
    c.dt = smooth() ? DType::f64 : dt;
    c.vals = gen_values(g, numel(s), kind, general() && kind == Vals::normal && g.chance(0.2));
    return emit(c, {true, kind == Vals::positive}, s);
  }
  DType rdt() { return smooth() ? DType::f64 : (g.chance(0.3) ? DType::f32 : DType::f64); }

  // A usable register satisfying pred, or -1. Registers with a huge dimension (empty tensors such
  // as ones({2^62, 0})) are not reused: constants shaped after them could not be generated.
  template <class P>
  int reg(P pred) {
    std::vector<int> ok;
    for (std::size_t k = 0; k < R.size(); ++k) {
      if (!info[k].usable || !R[k].defined()) continue;
      const Shape& s = R[k].shape();
      if (std::any_of(s.begin(), s.end(), [](std::int64_t d) { return d > 4096; })) continue;
      if (pred(R[k], info[k])) ok.push_back(static_cast<int>(k));
    }
    return ok.empty() ? -1 : g.pick(ok);
  }
  int any() {
    return reg([](const Tensor&, const RegInfo&) { return true; });
  }
  const Shape& shp(int k) const { return R[static_cast<std::size_t>(k)].shape(); }

  Instr un(Op op, int a) {
    Instr in{op};
    in.a = {a};
    return in;
  }
  Instr bin(Op op, int a, int b) {
    Instr in{op};
    in.a = {a, b};
    return in;
  }

  // A partner of a for broadcasting: an existing register that broadcasts with it, or a new constant.
  int partner(int a, Vals kind) {
    if (g.chance(0.5)) {
      const Shape s = shp(a);
      const int b = reg([&](const Tensor& t, const RegInfo& ri) {
        return bcast_ok(t.shape(), s) && (kind != Vals::positive || ri.positive) &&
               t.is_batched() == R[static_cast<std::size_t>(a)].is_batched();
      });
      if (b >= 0) return b;
    }
    Shape s = partner_shape(g, shp(a));
    if (general() && g.chance(0.05)) s = Shape{7};  // usually incompatible
    return constant(s, kind, rdt());
  }

  bool step();
  bool step_linalg();
  bool step_creation();
  bool step_batch();
};

bool Gen::step() {
  if (mode == "linalg" && g.chance(0.6)) return step_linalg();
  if (mode == "batch" && g.chance(0.4)) return step_batch();
  if (general() && g.chance(0.08)) return step_creation();
  const int a = any();
  if (a < 0) return false;
  const Shape s = shp(a);
  const auto rank = static_cast<std::int64_t>(s.size());
  const bool pos = info[static_cast<std::size_t>(a)].positive;
  const int choice = static_cast<int>(g.below(12));
  if (choice < 2) {  // unary
    std::vector<Op> ops = smooth() ? std::vector<Op>{Op::Neg, Op::Sin, Op::Cos, Op::Tanh, Op::Square, Op::Exp}
                                   : std::vector<Op>{Op::Neg, Op::Exp, Op::Log,  Op::Log1p, Op::Sqrt, Op::Square,
                                                     Op::Sin, Op::Cos, Op::Tanh, Op::Abs,   Op::Sign, Op::StopGrad};
    if (smooth() && pos) ops.insert(ops.end(), {Op::Log, Op::Log1p, Op::Sqrt});
    const Op op = g.pick(ops);
    emit(un(op, a), {true, op == Op::Exp || (pos && (op == Op::Sqrt || op == Op::Square))});
    return true;
  }
  if (choice < 4) {  // binary
    std::vector<Op> ops = smooth() ? std::vector<Op>{Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow}
                                   : std::vector<Op>{Op::Add,     Op::Sub,  Op::Mul,     Op::Div,   Op::Pow,
                                                     Op::Maximum, Op::Less, Op::Greater, Op::Equal, Op::Where};
    Op op = g.pick(ops);
    if (smooth() && op == Op::Pow && !pos) op = Op::Mul;
    if (op == Op::Where) {
      const int c = constant(partner_shape(g, s), Vals::mask, rdt());
      const int b = partner(a, Vals::normal);
      Instr in{Op::Where};
      in.a = g.chance(0.5) ? std::vector<int>{c, a, b} : std::vector<int>{c, b, a};
      emit(in);
      return true;
    }
    const int b = partner(a, smooth() && op == Op::Div ? Vals::positive : smooth() ? Vals::smooth : Vals::normal);
    const bool swap = !smooth() && g.chance(0.3);
    emit(swap ? bin(op, b, a) : bin(op, a, b));
    return true;
  }
  if (choice == 4) {  // scalar forms
    std::vector<Op> ops = smooth()
                              ? std::vector<Op>{Op::AddS, Op::SubS, Op::MulS, Op::DivS, Op::RAddS, Op::RSubS, Op::RMulS}
                              : std::vector<Op>{Op::AddS,  Op::SubS,  Op::MulS,  Op::DivS, Op::PowS,
                                                Op::RAddS, Op::RSubS, Op::RMulS, Op::RDivS};
    if (smooth() && pos) ops.insert(ops.end(), {Op::PowS, Op::RDivS});
    Instr in = un(g.pick(ops), a);
    std::vector<double> cs{2.0, 0.5, -1.5, 3.0, 1.25};
    if (!smooth()) cs.insert(cs.end(), {0.0, -0.0, NAN, INFINITY, 1e308});
    in.r = {g.pick(cs)};
    const bool stays_pos = pos && in.r[0] > 0 &&
                           (in.op == Op::AddS || in.op == Op::MulS || in.op == Op::RAddS || in.op == Op::RMulS ||
                            in.op == Op::DivS || in.op == Op::PowS);
    emit(in, {true, stays_pos});
    return true;
  }
  if (choice == 5) {  // reductions
    std::vector<Op> ops = smooth() ? std::vector<Op>{Op::Sum, Op::Mean, Op::SumTo}
                                   : std::vector<Op>{Op::Sum, Op::Mean, Op::Max, Op::SumTo};
    const Op op = g.pick(ops);
    Instr in = un(op, a);
    if (op == Op::SumTo) {
      in.i = partner_shape(g, s);
      if (general() && g.chance(0.1)) {
        in.i = {9, 9};
        in.expect = "bad-args";
      }
    } else {
      in.i = {g.chance(0.4) ? 1 : 0};
      for (std::int64_t d = 0; d < rank; ++d)
        if (g.chance(0.4)) in.i.push_back(g.chance(0.3) ? d - rank : d);
      if (general() && g.chance(0.1)) {
        in.i.push_back(g.chance(0.5) ? rank : -rank - 1);
        in.expect = "bad-args";
      } else if (general() && g.chance(0.05) && rank > 0) {
        in.i.push_back(0);
        in.i.push_back(-rank);
        in.expect = "bad-args";
      }
    }
    emit(in);
    return true;
  }
  if (choice == 6) {  // layout
    const int kind = static_cast<int>(g.below(6));
    Instr in = un(Op::Reshape, a);
    const std::int64_t n = numel(s);
    if (kind == 0) {
      const auto k = g.pick(std::vector<std::int64_t>{1, 2, 3, 4});
      if (n % k == 0) in.i = {n / k, k};
      else in.i = {n};
      if (g.chance(0.3)) in.i[0] = -1;
      if (g.chance(0.3)) in.i.insert(in.i.begin(), 1);
      if (general() && g.chance(0.1)) {
        in.i = {n + 1};
        in.expect = "bad-args";
      }
      if (general() && g.chance(0.05)) {
        in.i = {-2, n};
        in.expect = "bad-args";
      }
      if (general() && allowed("overflow") && g.chance(0.06)) {
        in.i = n == 0 ? Shape{std::int64_t{1} << 32, std::int64_t{1} << 32} : Shape{INT64_MAX, 2};
        in.expect = "overflow";
      }
    } else if (kind == 1) {
      in.op = g.chance(0.5) ? Op::Transpose : Op::Permute;
      if (in.op == Op::Permute) {
        for (std::int64_t d = 0; d < rank; ++d) in.i.push_back(d);
        std::shuffle(in.i.begin(), in.i.end(), g.g);
        for (auto& d : in.i)
          if (g.chance(0.2)) d -= rank;
        if (general() && g.chance(0.1)) {
          in.i.push_back(0);
          in.expect = "bad-args";
        }
      }
    } else if (kind == 2) {
      in.op = Op::Swapaxes;
      if (rank == 0 || (general() && g.chance(0.1))) {
        in.i = {rank, 0};
        in.expect = "bad-args";
      } else in.i = {g.range(-rank, rank - 1), g.range(-rank, rank - 1)};
    } else if (kind == 3) {
      in.op = Op::T;
      if (rank < 2) in.expect = "bad-args";
    } else {
      in.op = Op::BroadcastTo;
      Shape t;
      for (std::int64_t k = g.below(3); k > 0; --k) t.push_back(g.range(1, 3));
      for (auto d : s) t.push_back(d == 1 && g.chance(0.5) ? g.range(0, 3) : d);
      if (numel(t) > 64) t = s;
      in.i = t;
      if (general() && g.chance(0.08)) {
        in.i = {7, 11};
        if (s.size() > 2 || (!s.empty() && s.back() != 1 && s.back() != 11) ||
            (s.size() == 2 && s[0] != 1 && s[0] != 7))
          in.expect = "bad-args";
      }
      if (general() && allowed("overflow") && g.chance(0.08) && numel(s) == 1) {
        in.i = g.pick(std::vector<Shape>{
            {-1}, {2, -3}, {std::int64_t{1} << 32, std::int64_t{1} << 32}, {INT64_MAX, 2}, {std::int64_t{1} << 62, 4}});
        in.expect = "overflow";
      }
    }
    emit(in, {true, pos});
    return true;
  }
  if (choice == 7) {  // indexing
    const int kind = static_cast<int>(g.below(5));
    if (kind == 0) {
      Instr in = un(Op::Slice, a);
      if (rank == 0) {
        in.i = {0, 0, 1, 1};
        in.expect = "bad-args";
        emit(in);
        return true;
      }
      const std::int64_t ax = g.range(-rank, rank - 1);
      const std::int64_t len = s[static_cast<std::size_t>(ax < 0 ? ax + rank : ax)];
      in.i = {ax, g.range(-len - 2, len + 2), g.range(-len - 2, len + 2), g.range(1, 3)};
      if (general() && g.chance(0.1)) {
        in.i[3] = g.chance(0.5) ? 0 : -1;
        in.expect = "bad-args";
      }
      if (general() && g.chance(0.08)) {
        in.i = {ax, g.chance(0.5) ? INT64_MIN : -1, INT64_MAX, g.chance(0.5) ? INT64_MAX : 1};
        in.expect.clear();
      }
      emit(in, {true, pos});
      return true;
    }
    if (kind == 1) {  // concatenate / stack
      Instr in{g.chance(0.5) ? Op::Concat : Op::Stack};
      if (rank == 0 && in.op == Op::Concat) {
        in.a = {a, a};
        in.i = {0};
        in.expect = "bad-args";
        emit(in);
        return true;
      }
      const std::int64_t ax = in.op == Op::Concat ? g.range(-rank, rank - 1) : g.range(-rank - 1, rank);
      in.a = {a};
      for (std::int64_t k = g.below(3); k > 0; --k) {
        Shape t = s;
        if (in.op == Op::Concat) t[static_cast<std::size_t>(ax < 0 ? ax + rank : ax)] = g.range(0, 3);
        in.a.push_back(constant(t, smooth() ? Vals::smooth : Vals::normal, rdt()));
      }
      if (g.chance(0.3)) std::reverse(in.a.begin(), in.a.end());
      in.i = {ax};
      emit(in);
      return true;
    }
    if (kind == 2) {
      Instr in = un(g.chance(0.5) ? Op::Diag : Op::Diagonal, a);
      if (in.op == Op::Diag ? (rank != 1 && rank != 2) : rank < 2) in.expect = "bad-args";
      emit(in);
      return true;
    }
    Instr in = un(g.chance(0.5) ? Op::Tril : Op::Triu, a);
    in.i = {g.range(-2, 2)};
    if (rank < 2) in.expect = "bad-args";
    emit(in);
    return true;
  }
  if (choice == 8) {  // matmul
    Shape t;
    if (rank == 0) {
      t = {2};
      emit(bin(Op::Matmul, a, constant(t, Vals::normal)));
      out.back().expect = "bad-args";
      return true;
    }
    const std::int64_t inner = s.back();
    const std::int64_t k = g.range(0, 3);
    const int form = static_cast<int>(g.below(3));
    if (form == 0) t = {inner};
    else if (form == 1) t = {inner, k};
    else {
      t = {g.range(1, 2), inner, k};
    }
    if (general() && g.chance(0.08)) {
      t = {inner + 1, 2};
    }
    const int b = constant(t, smooth() ? Vals::smooth : Vals::normal, rdt());
    Instr in = bin(Op::Matmul, a, b);
    if (t.size() == 2 && t[0] != inner) in.expect = "bad-args";
    emit(in);
    return true;
  }
  if (choice == 9) {  // astype
    if (smooth()) return step_linalg();
    Instr in = un(Op::Astype, a);
    in.dt = g.chance(0.5) ? DType::f32 : DType::f64;
    emit(in, {true, pos});
    return true;
  }
  return step_linalg();
}

bool Gen::step_linalg() {
  // An SPD register, or make one from a register of rank >= 2 (or a new constant).
  int spd = reg([](const Tensor&, const RegInfo& ri) { return ri.spd; });
  Shape as;  // the shape of the SPD register
  if (spd >= 0) as = shp(spd);
  if (spd < 0 || g.chance(0.3)) {
    int x = reg([](const Tensor& t, const RegInfo&) { return t.ndim() >= 2 && t.numel() <= 24; });
    Shape xs;
    if (x < 0 || g.chance(0.3)) {
      xs = {g.range(0, 4), g.range(1, 3)};
      if (xs[0] == 0 && g.chance(0.7)) xs[0] = 2;
      if (g.chance(0.3)) xs.insert(xs.begin(), g.range(1, 2));
      x = constant(xs, smooth() ? Vals::smooth : Vals::normal, rdt());
    } else {
      xs = shp(x);
    }
    Instr in = un(Op::MakeSpd, x);
    in.i = {xs[xs.size() - 2]};
    as = xs;
    as.back() = as[as.size() - 2];
    spd = emit(in, {true, false, true}, as);
    if (g.chance(0.3)) return true;
  }
  const std::int64_t n = as.back();
  int target = spd;
  if (!smooth() && g.chance(0.15)) {  // not SPD (or not square)
    const int x = reg([](const Tensor& t, const RegInfo&) { return t.ndim() >= 2; });
    if (x >= 0) target = x;
  }
  auto rhs = [&]() {
    Shape b = g.chance(0.3) ? Shape{n} : Shape{n, g.range(0, 3)};
    if (b.size() == 2 && as.size() > 2 && g.chance(0.5)) b.insert(b.begin(), as[0]);
    return constant(b, smooth() ? Vals::smooth : Vals::normal, rdt());
  };
  std::vector<Op> ops{Op::Cholesky, Op::ChoSolve, Op::LogdetF, Op::Logdet, Op::Solve, Op::TriSolve};
  if (!smooth()) ops.insert(ops.end(), {Op::CholL, Op::CholInfo});
  const Op op = g.pick(ops);
  Instr in = un(op, target);
  if (op == Op::ChoSolve || op == Op::Solve) in.a.push_back(rhs());
  if (op == Op::TriSolve) {
    Instr ch = un(Op::Cholesky, target);
    const int l = emit(ch, {true, false, false, true});
    in.a = {l};
    const bool left = smooth() ? true : g.chance(0.7);
    if (left) in.a.push_back(rhs());
    else in.a.push_back(constant(Shape{g.range(0, 3), n}, smooth() ? Vals::smooth : Vals::normal, rdt()));
    in.i = {1, g.chance(0.5) ? 1 : 0, left ? 1 : 0};
    if (!smooth() && g.chance(0.3)) in.i[0] = 0;  // reads the (zero) upper triangle: singular unless n == 0
  }
  emit(in, {true, false, false, op == Op::Cholesky});
  return true;
}

bool Gen::step_creation() {
  Instr in{
      g.pick(std::vector<Op>{Op::Zeros, Op::Ones, Op::Full, Op::Eye, Op::Arange, Op::Linspace, Op::Randn, Op::Rand})};
  in.dt = rdt();
  in.i = gen_shape(g);
  in.r = {g.normal(), 0, 0};
  if (in.op == Op::Randn || in.op == Op::Rand) in.r = {static_cast<double>(g.below(1000))};
  if (in.op == Op::Eye) in.i = {g.range(0, 4)};
  if (in.op == Op::Linspace) {
    in.i = {g.range(0, 5)};
    in.r = {-1, 2};
  }
  if (in.op == Op::Arange) in.r = {0, static_cast<double>(g.range(-1, 6)), g.pick(std::vector<double>{1, 0.5, 2, -1})};
  if (g.chance(0.1)) {  // bad arguments
    if (in.op == Op::Eye || in.op == Op::Linspace) in.i = {-1};
    else if (in.op == Op::Arange) in.r[2] = 0;
    else in.i = {2, -3};
    in.expect = "bad-args";
  } else if (allowed("overflow") && g.chance(0.15)) {
    in.expect = "overflow";
    if (g.chance(0.15)) {
      in.op = Op::FromBlobNeg;
      in.i = g.pick(std::vector<Shape>{{-1}, {2, -3}});
    } else if (in.op == Op::Eye)
      in.i = {g.pick(std::vector<std::int64_t>{std::int64_t{1} << 31, std::int64_t{1} << 62, INT64_MAX})};
    else if (in.op == Op::Linspace)
      in.i = {g.pick(std::vector<std::int64_t>{std::int64_t{1} << 62, INT64_MAX})};  // bytes overflow
    else {
      in.op = g.pick(std::vector<Op>{Op::Zeros, Op::Ones, Op::Full});
      in.i = g.pick(std::vector<Shape>{{std::int64_t{1} << 32, std::int64_t{1} << 32},
                                       {INT64_MAX, 2},
                                       {INT64_MAX},
                                       {std::int64_t{1} << 61},
                                       {std::int64_t{1} << 62, 4, 0, 1}});
      if (in.i.size() == 4) in.expect.clear(), in.i = {std::int64_t{1} << 62, 0};  // zero elements: valid
    }
  }
  emit(in);
  return true;
}

bool Gen::step_batch() {
  const int kind = static_cast<int>(g.below(6));
  if (kind <= 1) {
    const int b = reg([](const Tensor& t, const RegInfo&) { return t.is_batched(); });
    if (b < 0) return false;
    Instr in = un(g.pick(std::vector<Op>{Op::BatchSum, Op::BatchMean, Op::BatchMax, Op::Unbatch}), b);
    emit(in);
    return true;
  }
  if (kind == 2) {
    const int u = reg([](const Tensor& t, const RegInfo&) { return !t.is_batched(); });
    const int b = reg([](const Tensor& t, const RegInfo&) { return t.is_batched(); });
    if (u < 0 || b < 0) return false;
    emit(bin(Op::BroadcastToBatch, u, b));
    return true;
  }
  if (kind == 3) {
    const int u = reg([](const Tensor& t, const RegInfo&) { return !t.is_batched() && t.ndim() >= 1; });
    if (u < 0) return false;
    emit(un(Op::AsBatch, u));
    return true;
  }
  if (kind == 4) {  // misuse: batch reductions of plain tensors, as_batch of batched ones
    const int u = any();
    Instr in = un(g.pick(std::vector<Op>{Op::BatchSum, Op::AsBatch}), u);
    const bool b = R[static_cast<std::size_t>(u)].is_batched();
    if (in.op == Op::BatchSum ? !b : (b || R[static_cast<std::size_t>(u)].ndim() == 0)) in.expect = "bad-args";
    emit(in);
    return true;
  }
  // binary between a batched register and anything
  const int b = reg([](const Tensor& t, const RegInfo&) { return t.is_batched(); });
  if (b < 0) return false;
  const int c = reg([&](const Tensor& t, const RegInfo&) { return bcast_ok(t.shape(), shp(b)); });
  emit(bin(g.pick(std::vector<Op>{Op::Add, Op::Mul, Op::Matmul, Op::Maximum}), b, c < 0 ? b : c));
  return true;
}

// ------------------------------------------------------------------ the run of one program
struct Runner {
  std::uint64_t seed;
  const Options& opt;
  Outcome outcome;
  Program p;
  Rng g;
  Runner(std::uint64_t s, const Options& o) : seed(s), opt(o), g(s) { p.seed = s; }

  void fail(const std::string& category, const std::string& message, const std::string& extra = "") {
    Failure f;
    f.seed = seed;
    f.category = category;
    f.message = message;
    f.repro = program_text(p) + extra;
    f.known = opt.allow.count(category) > 0;
    outcome.failures.push_back(std::move(f));
  }
  bool approx() const {
    for (const Instr& in : p.code)
      if (op_approx(in.op)) return true;
    return false;
  }
  // The tolerance of a comparison with a reordering path (jit's plan, vmap): 0 (bitwise) unless the
  // program has an op whose sums a plan may reorder (a transpose read by a GEMM flag, a
  // reassociated chain); then float32's when anything was float32 on the way, since a float32
  // value converted to float64 carries its rounding along.
  double tolerance() const {
    if (!approx()) return 0;
    bool f32 = false;
    for (const InputSpec& in : p.inputs) f32 = f32 || in.dt == DType::f32;
    for (const Instr& in : p.code) f32 = f32 || in.dt == DType::f32;
    return f32 ? 2e-5 : 1e-12;
  }
  bool has(bool (*pred)(Op)) const {
    for (const Instr& in : p.code)
      if (pred(in.op)) return true;
    return false;
  }
  void mismatch(const std::string& category, const Mismatch& m, const std::string& extra = "") {
    fail(category, m.text, extra);
  }

  // Runs fn; returns the snapshot or the vt::Error; other exceptions are failures of `category`.
  template <class F>
  Snapshot guarded(const std::string& category, F&& fn, const std::string& extra = "") {
    Snapshot s;
    try {
      s = snap(fn());
    } catch (const vt::Error& e) {
      s.ok = false;
      s.error = e.what();
    } catch (const std::exception& e) {
      s.ok = false;
      s.error = std::string("non-vt exception: ") + e.what();
      fail(category, fmt::format("threw {} (not vt::Error): {}", typeid(e).name(), e.what()), extra);
    } catch (...) {
      s.ok = false;
      s.error = "non-vt exception";
      fail(category, "threw a non-std exception", extra);
    }
    return s;
  }

  std::vector<Tensor> inputs() const {
    return {make_input(p.inputs[0]), make_input(p.inputs[1]), make_input(p.inputs[2])};
  }

  void generate_and_run();
  void oracle_jit(const Snapshot& eager);
  void oracle_vmap(const Snapshot& eager);
  void oracle_grad();
  template <class Loss>
  void oracle_jvp_hvp(const Loss& loss, const std::vector<Tensor>& in, const std::vector<Tensor>& ad, double mag);
  template <class Loss>
  void oracle_scan(const Loss& loss, const std::vector<Tensor>& in, const std::vector<Tensor>& ad);
  void oracle_nested_jit(const Snapshot& eager);
  void misuse();
  void run();
};

void Runner::generate_and_run() {
  std::vector<Tensor> R;
  std::vector<RegInfo> info;
  const bool smooth = p.mode == "smooth";
  const bool batch = p.mode == "batch";
  const std::int64_t B = batch ? g.pick(std::vector<std::int64_t>{0, 1, 1, 3, 4}) : 0;
  for (int k = 0; k < 3; ++k) {
    InputSpec in;
    in.shape = gen_shape(g, 3, !smooth);
    in.dt = smooth ? DType::f64 : (g.chance(0.25) ? DType::f32 : DType::f64);
    in.batched = batch && (k == 0 || g.chance(0.4));
    if (in.batched) in.shape.insert(in.shape.begin(), k == 2 && g.chance(0.2) ? B + 1 : B);
    const bool positive = smooth && g.chance(0.3);
    in.vals = gen_values(g, numel(in.shape), smooth ? (positive ? Vals::positive : Vals::smooth) : Vals::normal,
                         !smooth && g.chance(0.3));
    p.inputs.push_back(in);
    R.push_back(make_input(in));
    info.push_back({true, positive});
  }
  const std::int64_t steps = g.range(1, smooth ? 6 : 7);
  for (std::int64_t step = 0; step < steps; ++step) {
    Gen gen{g, p.mode, opt, R, info, {}, {}, {}};
    bool made = false;
    for (int tries = 0; tries < 5 && !made; ++tries) made = gen.step();
    if (!made) break;
    for (std::size_t k = 0; k < gen.out.size(); ++k) {
      const Instr& in = gen.out[k];
      p.code.push_back(in);
      g_current_repro = program_text(p);
      Tensor t;
      try {
        t = exec(in, R);
      } catch (const vt::Error& e) {
        outcome.kind = std::string("error:") + op_name(in.op);
        p.outputs = {static_cast<int>(R.size())};  // the failing instruction, so that it is live under jit
        return;
      } catch (const std::exception& e) {
        outcome.kind = std::string("crash:") + op_name(in.op);
        fail(in.expect.empty() ? "eager" : in.expect,
             fmt::format("eager {} threw {} (not vt::Error): {}", op_name(in.op), typeid(e).name(), e.what()));
        return;
      }
      if (!in.expect.empty()) {
        outcome.kind = std::string("no-error:") + op_name(in.op);
        fail(in.expect, fmt::format("eager {} returned a tensor of shape {} instead of raising vt::Error",
                                    op_name(in.op), t.defined() ? shape_text(t.shape()) : "(undefined)"));
        return;
      }
      if (in.op == Op::Slice) {  // Python's slice length, computed without overflow
        const auto& I = in.i;
        const Tensor& x = R[static_cast<std::size_t>(in.a[0])];
        const auto rank = static_cast<std::int64_t>(x.ndim());
        const std::int64_t len = x.shape()[static_cast<std::size_t>(I[0] < 0 ? I[0] + rank : I[0])];
        auto clamp = [&](std::int64_t i) {
          return i < 0 ? std::max<std::int64_t>(0, i + std::min(len, -(i + 1)) + 1 + 0 * len) : std::min(i, len);
        };
        auto norm = [&](std::int64_t i) -> std::int64_t {
          if (i < 0) return (i < -len) ? 0 : i + len;
          return std::min(i, len);
        };
        (void)clamp;
        const std::int64_t lo = norm(I[1]), hi = norm(I[2]);
        const __int128 count = hi > lo ? (static_cast<__int128>(hi) - lo + I[3] - 1) / I[3] : 0;
        const std::int64_t got = t.shape()[static_cast<std::size_t>(I[0] < 0 ? I[0] + rank : I[0])];
        if (got != static_cast<std::int64_t>(count)) {
          outcome.kind = "wrong:slice";
          fail("eager", fmt::format("slice gave length {} along the axis, Python's rule gives {}", got,
                                    static_cast<std::int64_t>(count)));
          return;
        }
      }
      R.push_back(t);
      RegInfo ri = gen.out_info[k];
      if (t.defined() && t.numel() > 4096) ri.usable = false;
      info.push_back(ri);
    }
  }
  // Outputs: the last register and sometimes another one.
  const int last = static_cast<int>(R.size()) - 1;
  p.outputs = {last};
  if (g.chance(0.4)) p.outputs.push_back(static_cast<int>(g.below(last + 1)));
  // Factorizations raise on values (not SPD): keep them live, or jit would rightly drop them.
  for (std::size_t k = 0; k < p.code.size(); ++k) {
    const Op op = p.code[k].op;
    if ((op == Op::Cholesky || op == Op::ChoSolve || op == Op::LogdetF || op == Op::Logdet || op == Op::Solve) &&
        static_cast<int>(3 + k) != last)
      p.outputs.push_back(static_cast<int>(3 + k));
  }
  outcome.kind = "ok";
}

void Runner::oracle_jit(const Snapshot& eager) {
  if (has(op_eager_only)) return;
  outcome.checks.push_back("jit");
  const std::vector<Tensor> in = inputs();
  auto jf = vt::jit([this](const Tensor& a, const Tensor& b, const Tensor& c) { return interpret(p, a, b, c); });
  // A plan runs at one batch size: jit may refuse batched arguments of different sizes, which
  // eager accepts while they never meet in an op.
  std::set<std::int64_t> sizes;
  for (const auto& s : p.inputs)
    if (s.batched) sizes.insert(s.shape[0]);
  const bool mixed_batch = sizes.size() > 1;
  for (int call = 0; call < 2; ++call) {
    const std::string extra =
        fmt::format("// check: jit(f)(in0, in1, in2) (call {}) equals f(in0, in1, in2)\n", call + 1);
    const Snapshot j = guarded(
        "jit", [&] { return jf(in[0], in[1], in[2]); }, extra);
    if (eager.ok && !j.ok && mixed_batch) return;
    if (eager.ok && !j.ok) return fail("jit", "jit raised where eager succeeded: " + j.error, extra);
    if (!eager.ok && j.ok) return fail("jit", "jit succeeded where eager raised: " + eager.error, extra);
    if (eager.ok)
      if (auto m = compare(eager, j, tolerance(), "jit vs eager")) return mismatch("jit", *m, extra);
  }
}

void Runner::oracle_vmap(const Snapshot& eager) {
  if (has(op_batch_family)) return;
  for (const auto& in : p.inputs)
    if (in.batched) return;
  outcome.checks.push_back("vmap");
  const std::int64_t B = g.pick(std::vector<std::int64_t>{0, 1, 2, 3});
  vt::InAxes axes(3);
  bool any = false;
  for (auto& a : axes)
    if (g.chance(0.7)) a = 0, any = true;
  if (!any) axes[0] = 0;
  auto batched_inputs = [&](std::int64_t b, std::vector<InputSpec>& specs) {
    specs.clear();
    for (int k = 0; k < 3; ++k) {
      InputSpec s = p.inputs[static_cast<std::size_t>(k)];
      if (axes[static_cast<std::size_t>(k)]) {
        s.shape.insert(s.shape.begin(), b);
        s.vals = gen_values(g, numel(s.shape), p.mode == "smooth" ? Vals::smooth : Vals::normal, false);
        s.batched = g.chance(0.3);  // pass already batched sometimes
      }
      specs.push_back(s);
    }
  };
  auto axes_text = [&] {
    std::string t;
    for (auto& a : axes) t += std::string(t.empty() ? "" : ", ") + (a ? "0" : "not_mapped");
    return "{" + t + "}";
  };
  auto vf = vt::vmap([this](const Tensor& a, const Tensor& b, const Tensor& c) { return interpret(p, a, b, c); }, axes);
  std::vector<InputSpec> specs;
  batched_inputs(B, specs);
  std::string extra;
  for (int k = 0; k < 3; ++k)
    extra += fmt::format("Tensor X{} = {};\n", k, input_text(specs[static_cast<std::size_t>(k)]));
  extra +=
      fmt::format("// check: unbatch(vmap(f, {})(X0, X1, X2)[k])[i] equals f(X0[i], X1[i], X2[i])[k] (unmapped: in*)\n",
                  axes_text());
  std::vector<Tensor> X;
  for (const auto& s : specs) X.push_back(make_input(s));
  const Snapshot v = guarded(
      "vmap", [&] { return vf(X[0], X[1], X[2]); }, extra);
  // The per-example loop.
  bool any_error = false;
  std::string loop_error;
  std::vector<Snapshot> per;
  for (std::int64_t i = 0; i < B; ++i) {
    std::vector<Tensor> args;
    for (int k = 0; k < 3; ++k) {
      const InputSpec& s = specs[static_cast<std::size_t>(k)];
      if (!axes[static_cast<std::size_t>(k)]) {
        args.push_back(make_input(s));
        continue;
      }
      const Shape es(s.shape.begin() + 1, s.shape.end());
      const auto n = numel(es);
      std::vector<double> vals(s.vals.begin() + i * n, s.vals.begin() + (i + 1) * n);
      args.push_back(Tensor::from_vector(vals, es, s.dt));
    }
    per.push_back(guarded(
        "vmap", [&] { return interpret(p, args[0], args[1], args[2]); }, extra));
    if (!per.back().ok) any_error = true, loop_error = per.back().error;
  }
  if (B == 0) {
    if (!eager.ok) return;  // nothing to compare with: errors at B = 0 may depend on values
    if (!v.ok) return fail("vmap", "vmap raised at batch size 0 where f succeeds per example: " + v.error, extra);
    for (std::size_t k = 0; k < v.shapes.size(); ++k)
      if (!v.batched[k] || v.batch[k] != 0 || v.shapes[k] != eager.shapes[k] || v.dtypes[k] != eager.dtypes[k])
        return fail("vmap",
                    fmt::format("vmap at batch size 0: output {} has shape {} (batched {}, B {}), per example {}", k,
                                shape_text(v.shapes[k]), v.batched[k], v.batch[k], shape_text(eager.shapes[k])),
                    extra);
    return;
  }
  if (any_error && v.ok) return fail("vmap", "vmap succeeded where an example raised: " + loop_error, extra);
  if (!any_error && !v.ok) return fail("vmap", "vmap raised where every example succeeds: " + v.error, extra);
  if (!v.ok) return;
  // Split the batched results into examples.
  for (std::int64_t i = 0; i < B; ++i) {
    Snapshot e;
    e.ok = true;
    for (std::size_t k = 0; k < v.shapes.size(); ++k) {
      if (!v.batched[k] || v.batch[k] != B)
        return fail(
            "vmap",
            fmt::format("vmap output {} is not batched with B = {} (batched {}, B {})", k, B, v.batched[k], v.batch[k]),
            extra);
      const auto n = numel(v.shapes[k]);
      e.shapes.push_back(v.shapes[k]);
      e.dtypes.push_back(v.dtypes[k]);
      e.batched.push_back(false);
      e.batch.push_back(0);
      e.values.emplace_back(v.values[k].begin() + i * n, v.values[k].begin() + (i + 1) * n);
    }
    if (auto m = compare(per[static_cast<std::size_t>(i)], e, tolerance(), fmt::format("example {}: loop vs vmap", i)))
      return mismatch("vmap", *m, extra);
  }
  // Nested: the same batch as the inner level of vmap(vmap(f)), under an outer axis of size 1, gives
  // the same values, [1, B, ...] (the inner vmap maps a per-example axis, by a loop).
  if (!opt.skip.count("nested-vmap")) {
    outcome.checks.push_back("nested-vmap");
    const std::string ex =
        extra +
        "// check: vmap(vmap(f, axes), axes)(X0', X1', X2') (Xk' = Xk with a leading axis of 1) equals "
        "vmap(f, axes)(X0, X1, X2)\n";
    std::vector<Tensor> XX;
    for (int k = 0; k < 3; ++k) {
      InputSpec plain = specs[static_cast<std::size_t>(k)];
      if (!axes[static_cast<std::size_t>(k)]) {
        XX.push_back(X[static_cast<std::size_t>(k)]);
        continue;
      }
      plain.batched = false;
      plain.shape.insert(plain.shape.begin(), 1);
      XX.push_back(make_input(plain));
    }
    const Snapshot nv = guarded(
        "nested-vmap", [&] { return vt::vmap(vf, axes)(XX[0], XX[1], XX[2]); }, ex);
    if (!nv.ok) return fail("nested-vmap", "vmap(vmap(f)) raised where vmap(f) succeeds: " + nv.error, ex);
    Snapshot flat = v;
    flat.values = nv.values;
    for (std::size_t k = 0; k < nv.shapes.size(); ++k) {
      Shape want = v.shapes[k];
      want.insert(want.begin(), B);
      if (!nv.batched[k] || nv.batch[k] != 1 || nv.shapes[k] != want)
        return fail("nested-vmap",
                    fmt::format("output {}: shape {} (batched {}, B {}), expected {} batched with B = 1", k,
                                shape_text(nv.shapes[k]), nv.batched[k], nv.batch[k], shape_text(want)),
                    ex);
    }
    if (auto m = compare(v, flat, tolerance(), "vmap(vmap(f)) vs vmap(f)")) return mismatch("nested-vmap", *m, ex);
  }
  // One trace across batch sizes: jit(vmap(f)) with batched inputs of B = 1, 2, 5.
  if (has(op_eager_only) || !g.chance(0.5)) return;
  outcome.checks.push_back("one-trace");
  auto jv = vt::jit(vf);
  bool all_ok = true;
  for (std::int64_t b : {1, 2, 5}) {
    batched_inputs(b, specs);
    std::string ex;
    for (int k = 0; k < 3; ++k) {
      InputSpec s = specs[static_cast<std::size_t>(k)];
      if (axes[static_cast<std::size_t>(k)]) s.batched = true;
      specs[static_cast<std::size_t>(k)] = s;
      ex += fmt::format("Tensor X{} = {};\n", k, input_text(s));
    }
    ex += fmt::format("auto jv = jit(vmap(f, {}));  // called with B = 1, 2, 5: one trace, equal to vmap(f)\n",
                      axes_text());
    std::vector<Tensor> Xb;
    for (const auto& s : specs) Xb.push_back(make_input(s));
    const Snapshot ev = guarded(
        "one-trace", [&] { return vf(Xb[0], Xb[1], Xb[2]); }, ex);
    const Snapshot jr = guarded(
        "one-trace", [&] { return jv(Xb[0], Xb[1], Xb[2]); }, ex);
    all_ok &= ev.ok;
    if (ev.ok != jr.ok)
      return fail("one-trace",
                  fmt::format("B = {}: vmap {} but jit(vmap) {}", b, ev.ok ? "succeeded" : "raised " + ev.error,
                              jr.ok ? "succeeded" : "raised " + jr.error),
                  ex);
    if (ev.ok)
      if (auto m = compare(ev, jr, tolerance(), fmt::format("B = {}: jit(vmap) vs vmap", b)))
        return mismatch("one-trace", *m, ex);
  }
  const auto c = jv.counters();
  if (all_ok && c.traces != 1)
    fail("one-trace", fmt::format("jit(vmap(f)) traced {} times for batch sizes 1, 2, 5", c.traces));
}

// Loss: sum_k sum(out_k * w_k), w_k fixed random weights.
Tensor weighted_loss(const std::vector<Tensor>& outs) {
  Tensor loss = vt::zeros({});
  for (std::size_t k = 0; k < outs.size(); ++k)
    loss = loss + vt::sum(outs[k] * vt::randn(outs[k].shape(), 77 + k, outs[k].dtype()));
  return loss;
}

void Runner::oracle_grad() {
  std::int64_t total = 0;
  for (const auto& in : p.inputs) total += numel(in.shape);
  if (total > 30) return;
  outcome.checks.push_back("grad");
  const std::vector<Tensor> in = inputs();
  auto loss = [this](const Tensor& a, const Tensor& b, const Tensor& c) {
    return weighted_loss(interpret(p, a, b, c));
  };
  const std::string extra =
      "// check: grad([&](Tensor a, Tensor b, Tensor c) { sum_k sum(f(a, b, c)[k] * randn(shape_k, 77 + k)) }, {0, 1, "
      "2})"
      " equals central differences\n";
  std::vector<Tensor> ad;
  try {
    ad = vt::grad(loss, {0, 1, 2})(in[0], in[1], in[2]);
  } catch (const vt::Error& e) {
    return fail("grad", std::string("grad raised where the program succeeds: ") + e.what(), extra);
  } catch (const std::exception& e) {
    return fail("grad", std::string("grad threw a non-vt exception: ") + e.what(), extra);
  }
  // Scale of the terms of the loss, for the finite-difference round-off.
  double mag = 1;
  for (const Tensor& o : interpret(p, in[0], in[1], in[2]))
    for (double v : o.to_vector<double>()) mag += std::abs(v);
  for (int k = 0; k < 3; ++k) {
    const std::vector<double> x = in[static_cast<std::size_t>(k)].to_vector<double>();
    const std::vector<double> got = ad[static_cast<std::size_t>(k)].to_vector<double>();
    if (ad[static_cast<std::size_t>(k)].shape() != in[static_cast<std::size_t>(k)].shape())
      return fail(
          "grad",
          fmt::format("gradient {} has shape {}, its input {}", k, shape_text(ad[static_cast<std::size_t>(k)].shape()),
                      shape_text(in[static_cast<std::size_t>(k)].shape())),
          extra);
    for (std::size_t j = 0; j < x.size(); ++j) {
      const double h = 1e-6 * std::max(1.0, std::abs(x[j]));
      auto at = [&](double v) {
        std::vector<double> xv = x;
        xv[j] = v;
        std::vector<Tensor> args = in;
        args[static_cast<std::size_t>(k)] = Tensor::from_vector(xv, in[static_cast<std::size_t>(k)].shape());
        return loss(args[0], args[1], args[2]).item();
      };
      const double fd = (at(x[j] + h) - at(x[j] - h)) / (2 * h);
      if (!(std::abs(got[j] - fd) <= 1e-5 * std::abs(fd) + 1e-8 * mag / h * 1e-2 + 1e-7))
        return fail(
            "grad",
            fmt::format("d loss / d in{}[{}]: reverse {} vs central differences {}", k, j, num(got[j]), num(fd)),
            extra);
    }
  }
  // jit of the gradient equals the eager gradient.
  {
    const std::string ex =
        "// check: jit(grad(loss, {0, 1, 2}))(in0, in1, in2) equals grad(loss, {0, 1, 2})(in0, in1, in2)\n";
    auto jg = vt::jit(vt::grad(loss, {0, 1, 2}));
    const Snapshot j = guarded(
        "grad", [&] { return jg(in[0], in[1], in[2]); }, ex);
    if (!j.ok) return fail("grad", "jit(grad) raised: " + j.error, ex);
    if (auto m = compare(snap(ad), j, 1e-10, "jit(grad) vs grad")) return fail("grad", m->text, ex);
  }
  // grad through a jitted function that captures the tracked argument.
  if (!opt.skip.count("jit-capture-grad")) {
    outcome.checks.push_back("jit-capture-grad");
    const std::string ex =
        "// check: grad([&](Tensor x) { return jit([&](Tensor b, Tensor c) { return loss(x, b, c); })(in1, in2); "
        "})(in0)\n"
        "//        equals grad(loss)(in0, in1, in2)\n";
    auto outer = [&](const Tensor& x) {
      auto inner = vt::jit([&](const Tensor& b, const Tensor& c) { return loss(x, b, c); });
      return inner(in[1], in[2]);
    };
    std::vector<Tensor> g1;
    const Snapshot gc = guarded(
        "jit-capture-grad", [&] { return std::vector<Tensor>{vt::grad(outer)(in[0])}; }, ex);
    if (!gc.ok) return fail("jit-capture-grad", "raised: " + gc.error, ex);
    if (auto m = compare(snap({ad[0]}), gc, 1e-10, "captured-jit grad vs grad"))
      return fail("jit-capture-grad", m->text, ex);
  }
  if (!opt.skip.count("jvp")) oracle_jvp_hvp(loss, in, ad, mag);
  if (!opt.skip.count("scan")) oracle_scan(loss, in, ad);
}

// The loss as the body of a scan (recorded once, in1 and in2 read from outside and so lifted into
// the loop's inputs, in0 the carry), on every fourth program: its ys' mean equals the loss, and its
// gradient, through the scan's reverse pullback, equals grad's, eagerly and under jit.
template <class Loss>
void Runner::oracle_scan(const Loss& loss, const std::vector<Tensor>& in, const std::vector<Tensor>& ad) {
  if (seed % 4 != 1) return;
  outcome.checks.push_back("scan");
  const std::string ex =
      "// check: scan([&](Tensor c, Tensor i) { return std::pair{c, loss(c, b, c2)}; }, a, 2) with a, b, c2 = in0, "
      "in1, in2:\n//        the mean of its ys equals loss(in0, in1, in2), and its gradient (eager and jit) grad's\n";
  auto scanned = [&](const Tensor& a, const Tensor& b, const Tensor& c) {
    auto body = [&](const Tensor& carry, const Tensor&) { return std::pair{carry, loss(carry, b, c)}; };
    return vt::sum(vt::scan(body, a, 2).second) * 0.5;
  };
  const Snapshot value = guarded(
      "scan",
      [&] {
        return std::vector<Tensor>{scanned(in[0], in[1], in[2]), loss(in[0], in[1], in[2])};
      },
      ex);
  if (!value.ok) return fail("scan", "scan raised where grad succeeds: " + value.error, ex);
  const double got = value.values.at(0).at(0), want = value.values.at(1).at(0);
  if (!(std::abs(got - want) <= 1e-12 * (1 + std::abs(want))))
    return fail("scan", fmt::format("scan's mean y {} vs the loss {}", num(got), num(want)), ex);
  const Snapshot g = guarded(
      "scan",
      [&] {
        return vt::grad(scanned, {0, 1, 2})(in[0], in[1], in[2]);
      },
      ex);
  if (!g.ok) return fail("scan", "grad through scan raised where grad succeeds: " + g.error, ex);
  if (auto m = compare(snap(ad), g, 1e-10, "grad through scan vs grad")) return fail("scan", m->text, ex);
  auto jg = vt::jit(vt::grad(scanned, {0, 1, 2}));
  const Snapshot j = guarded(
      "scan", [&] { return jg(in[0], in[1], in[2]); }, ex);
  if (!j.ok) return fail("scan", "jit(grad) through scan raised: " + j.error, ex);
  if (auto m = compare(snap(ad), j, 1e-10, "jit(grad) through scan vs grad")) return fail("scan", m->text, ex);
}

// Forward mode and second derivatives of the same loss: the jvp along random tangents equals the
// gradient's inner product with them (the reverse rule), and a Hessian-vector product equals central
// differences of the gradient along the vector.
template <class Loss>
void Runner::oracle_jvp_hvp(const Loss& loss, const std::vector<Tensor>& in, const std::vector<Tensor>& ad,
                            double mag) {
  outcome.checks.push_back("jvp");
  const std::string ex =
      "// check: jvp(loss, {in0, in1, in2}, {v0, v1, v2}).second equals sum_k <grad_k, v_k> (v_k = randn(shape_k, 91 "
      "+ k)),\n//        and hvp(in0 -> loss(in0, in1, in2))(in0, v0) equals central differences of the gradient\n";
  std::vector<Tensor> v;
  for (std::size_t k = 0; k < 3; ++k) v.push_back(vt::randn(in[k].shape(), 91 + k, in[k].dtype()));
  double want = 0, scale = 1;
  for (std::size_t k = 0; k < 3; ++k) {
    const std::vector<double> g = ad[k].to_vector<double>(), d = v[k].to_vector<double>();
    for (std::size_t j = 0; j < g.size(); ++j) {
      want += g[j] * d[j];
      scale += std::abs(g[j] * d[j]);
    }
  }
  const Snapshot t = guarded(
      "jvp",
      [&] {
        return std::vector<Tensor>{
            vt::jvp([&](const Tensor& a, const Tensor& b, const Tensor& c) { return loss(a, b, c); },
                    {in[0], in[1], in[2]}, {v[0], v[1], v[2]})
                .second};
      },
      ex);
  if (!t.ok) return fail("jvp", "jvp raised where grad succeeds: " + t.error, ex);
  const double got = t.values.at(0).at(0);
  if (!(std::abs(got - want) <= 1e-9 * scale))
    return fail("jvp", fmt::format("jvp {} vs <grad, v> {}", num(got), num(want)), ex);
  // The Hessian along v0, against central differences of the (reverse) gradient along v0: three sweeps of second
  // order and two gradients, on every fourth program (the budget's time under the sanitizers).
  if (seed % 4 != 0) return;
  auto of_first = [&](const Tensor& a) { return loss(a, in[1], in[2]); };
  const Snapshot hv = guarded(
      "jvp", [&] { return std::vector<Tensor>{vt::hvp(of_first)(in[0], v[0])}; }, ex);
  if (!hv.ok) return fail("jvp", "hvp raised where grad succeeds: " + hv.error, ex);
  const double h = 1e-5;
  const Tensor grad_plus = vt::grad(of_first)(in[0] + v[0] * h), grad_minus = vt::grad(of_first)(in[0] - v[0] * h);
  const std::vector<double> plus = grad_plus.to_vector<double>(), minus = grad_minus.to_vector<double>();
  for (std::size_t j = 0; j < plus.size(); ++j) {
    const double fd = (plus[j] - minus[j]) / (2 * h);
    const double ad_j = hv.values.at(0).at(j);
    if (!(std::abs(ad_j - fd) <= 1e-4 * std::abs(fd) + 1e-6 * mag))
      return fail("jvp", fmt::format("hvp[{}]: {} vs central differences of the gradient {}", j, num(ad_j), num(fd)),
                  ex);
  }
}

void Runner::oracle_nested_jit(const Snapshot& eager) {
  if (has(op_eager_only) || opt.skip.count("nested-jit")) return;
  std::set<std::int64_t> sizes;
  for (const auto& s : p.inputs)
    if (s.batched) sizes.insert(s.shape[0]);
  if (sizes.size() > 1) return;
  outcome.checks.push_back("nested-jit");
  const std::vector<Tensor> in = inputs();
  auto inner = vt::jit([this](const Tensor& a, const Tensor& b, const Tensor& c) { return interpret(p, a, b, c); });
  auto outer = vt::jit([&inner](const Tensor& a, const Tensor& b, const Tensor& c) { return inner(a, b, c); });
  const std::string ex =
      "// check: auto inner = jit(f); jit([&](Tensor a, Tensor b, Tensor c) { return inner(a, b, c); })(in0, in1, in2) "
      "equals f(in0, in1, in2)\n";
  const Snapshot j = guarded(
      "nested-jit", [&] { return outer(in[0], in[1], in[2]); }, ex);
  if (eager.ok && !j.ok) return fail("nested-jit", "nested jit raised where eager succeeded: " + j.error, ex);
  if (!eager.ok && j.ok) return fail("nested-jit", "nested jit succeeded where eager raised: " + eager.error, ex);
  if (eager.ok)
    if (auto m = compare(eager, j, tolerance(), "nested jit vs eager")) mismatch("nested-jit", *m, ex);
}

// ------------------------------------------------------------------ misuse scenarios
struct Scenario {
  const char* name;
  const char* category;  // of a failure
  const char* code;      // the repro
  std::function<void()> run;
  bool expect_error = true;  // false: must succeed (and `run` checks its value, raising std::logic_error)
};

const std::vector<Scenario>& scenarios() {
  using namespace vt;
  static const std::vector<Scenario> list = [] {
    std::vector<Scenario> s;
    auto x3 = [] { return Tensor::from_vector({1, 2, 3}, {3}); };
    s.push_back({"exp(undefined)", "misuse", "exp(Tensor());", [] { exp(Tensor()); }});
    s.push_back({"add(x, undefined)", "misuse", "add(x3, Tensor());", [=] { add(x3(), Tensor()); }});
    s.push_back({"matmul(undefined, x)", "misuse", "matmul(Tensor(), x3);", [=] { matmul(Tensor(), x3()); }});
    s.push_back({"sum(undefined)", "misuse", "sum(Tensor());", [] { sum(Tensor()); }});
    s.push_back({"reshape(undefined)", "misuse", "reshape(Tensor(), {1});", [] { reshape(Tensor(), {1}); }});
    s.push_back({"where(undefined, x, x)", "misuse", "where(Tensor(), x3, x3);", [=] { where(Tensor(), x3(), x3()); }});
    s.push_back({"concatenate with undefined", "misuse", "concatenate({x3, Tensor()});", [=] {
                   concatenate({x3(), Tensor()});
                 }});
    s.push_back({"cholesky(undefined)", "misuse", "cholesky(Tensor());", [] { cholesky(Tensor()); }});
    s.push_back({"astype(undefined)", "misuse", "astype(Tensor(), DType::f32);", [] { astype(Tensor(), DType::f32); }});
    s.push_back({"undefined.shape()", "misuse", "Tensor().shape();", [] { (void)Tensor().shape(); }});
    s.push_back({"grad of a non-scalar", "misuse", "grad([](Tensor x) { return x * 2.0; })(x3);",
                 [=] { grad([](const Tensor& x) { return x * 2.0; })(x3()); }});
    s.push_back({"grad argnums out of range", "misuse", "grad([](Tensor x) { return sum(x); }, {1})(x3);",
                 [=] { grad([](const Tensor& x) { return sum(x); }, std::vector<int>{1})(x3()); }});
    s.push_back({"grad of undefined argument", "misuse", "grad([](Tensor x) { return sum(x); })(Tensor());",
                 [] { grad([](const Tensor& x) { return sum(x); })(Tensor()); }});
    s.push_back({"vmap of a scalar", "misuse", "vmap([](Tensor x) { return x; })(Tensor::scalar(1.0));",
                 [] { vmap([](const Tensor& x) { return x; })(Tensor::scalar(1.0)); }});
    s.push_back({"vmap of undefined", "misuse", "vmap([](Tensor x) { return x; })(Tensor());",
                 [] { vmap([](const Tensor& x) { return x; })(Tensor()); }});
    s.push_back({"vmap batch sizes differ", "misuse",
                 "vmap([](Tensor a, Tensor b) { return a + b; })(zeros({2, 3}), zeros({3, 3}));", [] {
                   vmap([](const Tensor& a, const Tensor& b) { return a + b; })(zeros({2, 3}), zeros({3, 3}));
                 }});
    s.push_back({"vmap in_axes count", "misuse", "vmap([](Tensor a) { return a; }, {0, 0})(zeros({2}));", [] {
                   vmap([](const Tensor& a) { return a; }, InAxes{0, 0})(zeros({2}));
                 }});
    s.push_back({"vmap no mapped argument", "misuse", "vmap([](Tensor a) { return a; }, {not_mapped})(zeros({2}));",
                 [] { vmap([](const Tensor& a) { return a; }, InAxes{not_mapped})(zeros({2})); }});
    s.push_back({"vmap axis out of range", "misuse", "vmap([](Tensor a) { return a; }, {3})(zeros({2}));",
                 [] { vmap([](const Tensor& a) { return a; }, InAxes{3})(zeros({2})); }});
    s.push_back({"nested vmap over a scalar", "misuse",
                 "vmap([](Tensor a) { return vmap([](Tensor b) { return b; })(a); })(zeros({2}));",
                 [] { vmap([](const Tensor& a) { return vmap([](const Tensor& b) { return b; })(a); })(zeros({2})); }});
    s.push_back({"vmap out_axes out of range", "misuse", "vmap([](Tensor a) { return a; }, {}, 5)(zeros({2}));",
                 [] { vmap([](const Tensor& a) { return a; }, InAxes{}, 5)(zeros({2})); }});
    s.push_back({"item of a vector", "misuse", "x3.item();", [=] { (void)x3().item(); }});
    s.push_back({"at out of range", "misuse", "x3.at({3});", [=] { (void)x3().at({3}); }});
    s.push_back({"at negative index", "misuse", "x3.at({-1});", [=] { (void)x3().at({-1}); }});
    s.push_back({"batch_size of plain", "misuse", "x3.batch_size();", [=] { (void)x3().batch_size(); }});
    s.push_back({"shape(axis) out of range", "misuse", "x3.shape(1);", [=] { (void)x3().shape(1); }});
    s.push_back({"as_eigen of rank 3", "misuse", "zeros({1, 1, 1}).as_eigen<double>();", [] {
                   (void)zeros({1, 1, 1}).as_eigen<double>();
                 }});
    s.push_back({"data<float> of float64", "misuse", "x3.data<float>();", [=] { (void)x3().data<float>(); }});
    s.push_back({"item while tracing", "misuse", "jit([](Tensor x) { return x * x.item(); })(Tensor::scalar(2.0));",
                 [] { jit([](const Tensor& x) { return x * x.item(); })(Tensor::scalar(2.0)); }});
    s.push_back({"plain vmap results of a batched argument while tracing", "misuse",
                 "jit([](Tensor x) { return vmap([](Tensor p) { return p; }, {}, 0)(x); })(as_batch(zeros({2, 2})));",
                 [] {
                   jit([](const Tensor& x) { return vmap([](const Tensor& p) { return p; }, {}, 0)(x); })(
                       as_batch(zeros({2, 2})));
                 }});
    s.push_back(
        {"unbatch while tracing", "misuse", "jit([](Tensor x) { return unbatch(x); })(as_batch(zeros({2, 2})));", [] {
           jit([](const Tensor& x) { return unbatch(x); })(as_batch(zeros({2, 2})));
         }});
    s.push_back(
        {"batch_size while tracing", "misuse",
         "jit([](Tensor x) { return x * double(x.batch_size()); })(as_batch(zeros({2, 2})));", [] {
           jit([](const Tensor& x) { return x * static_cast<double>(x.batch_size()); })(as_batch(zeros({2, 2})));
         }});
    s.push_back({"jit of undefined argument", "misuse", "jit([](Tensor x) { return x + 1.0; })(Tensor());",
                 [] { jit([](const Tensor& x) { return x + 1.0; })(Tensor()); }});
    s.push_back({"from_vector count", "misuse", "Tensor::from_vector({1, 2}, {3});", [] {
                   Tensor::from_vector({1, 2}, {3});
                 }});
    s.push_back({"cho_solve of empty factor", "misuse", "cho_solve(CholeskyFactor{}, x3);",
                 [=] { cho_solve(CholeskyFactor{}, x3()); }});
    s.push_back({"logdet of empty factor", "misuse", "logdet(CholeskyFactor{});", [] { logdet(CholeskyFactor{}); }});
    s.push_back(
        {"as_batch of a scalar", "misuse", "as_batch(Tensor::scalar(1.0));", [] { as_batch(Tensor::scalar(1.0)); }});
    s.push_back({"as_batch of batched", "misuse", "as_batch(as_batch(zeros({2, 2})));", [] {
                   as_batch(as_batch(zeros({2, 2})));
                 }});
    s.push_back({"batch_sum of plain", "misuse", "batch_sum(x3);", [=] { batch_sum(x3()); }});
    s.push_back({"stack of none", "misuse", "stack({});", [] { stack({}); }});
    s.push_back({"concatenate of none", "misuse", "concatenate({});", [] { concatenate({}); }});
    s.push_back({"t of a vector", "misuse", "x3.t();", [=] { (void)x3().t(); }});
    s.push_back({"vjp cotangent shape", "misuse", "vjp([](Tensor x) { return x * 2.0; }, x3).second(zeros({4}));",
                 [=] { vjp([](const Tensor& x) { return x * 2.0; }, x3()).second(zeros({4})); }});
    s.push_back({"vjp cotangent dtype", "misuse",
                 "vjp([](Tensor x) { return x * 2.0; }, x3).second(zeros({3}, DType::f32));",
                 [=] { vjp([](const Tensor& x) { return x * 2.0; }, x3()).second(zeros({3}, DType::f32)); }});
    s.push_back({"cholesky of NaN", "misuse", "cholesky(full({2, 2}, NAN));", [] { cholesky(full({2, 2}, NAN)); }});
    s.push_back({"cholesky not SPD", "misuse", "cholesky(-eye(3));", [] { cholesky(-eye(3)); }});
    // Listed bugs being fixed.
    s.push_back({"grad through jit capturing the argument", "jit-capture-grad",
                 "Tensor p = Tensor::scalar(3.0);\n"
                 "Tensor g = grad([&](Tensor x) { return jit([&](Tensor q) { return sum(q * x); })(p); "
                 "})(Tensor::scalar(3.0));  // must be 3",
                 [] {
                   const Tensor p = Tensor::scalar(3.0);
                   const Tensor g = grad([&](const Tensor& x) {
                     return jit([&](const Tensor& q) { return sum(q * x); })(p);
                   })(Tensor::scalar(3.0));
                   if (g.item() != 3.0) throw std::logic_error(fmt::format("gradient {} instead of 3", g.item()));
                 },
                 false});
    s.push_back({"nested jit", "nested-jit",
                 "auto inner = jit([](Tensor x) { return exp(x) * 2.0; });\n"
                 "Tensor y = jit([&](Tensor x) { return inner(x) + 1.0; })(x3);  // must equal exp(x3) * 2 + 1",
                 [=] {
                   auto inner = jit([](const Tensor& x) { return exp(x) * 2.0; });
                   const Tensor y = jit([&](const Tensor& x) { return inner(x) + 1.0; })(x3());
                   const auto v = y.to_vector<double>();
                   for (int k = 0; k < 3; ++k)
                     if (v[static_cast<std::size_t>(k)] != std::exp(k + 1.0) * 2.0 + 1.0)
                       throw std::logic_error("wrong value");
                 },
                 false});
    s.push_back({"zeros overflow", "overflow", "zeros({std::int64_t{1} << 32, std::int64_t{1} << 32});", [] {
                   zeros({std::int64_t{1} << 32, std::int64_t{1} << 32});
                 }});
    s.push_back({"reshape overflow", "overflow", "reshape(zeros({2}), {INT64_MAX, 2});", [] {
                   reshape(zeros({2}), {INT64_MAX, 2});
                 }});
    s.push_back({"eye overflow", "overflow", "eye(std::int64_t{1} << 31);", [] { eye(std::int64_t{1} << 31); }});
    s.push_back({"broadcast_to negative", "overflow", "broadcast_to(zeros({1}), {-1});",
                 [] { broadcast_to(zeros({1}), {-1}); }});
    s.push_back({"from_blob negative", "overflow", "double buf[4]; Tensor::from_blob(buf, {-1}, DType::f64);", [] {
                   static double buf[4];
                   Tensor::from_blob(buf, {-1}, DType::f64);
                 }});
    return s;
  }();
  return list;
}

void Runner::misuse() {
  std::vector<const Scenario*> ok;
  for (const Scenario& s : scenarios())
    if (!opt.skip.count(s.category)) ok.push_back(&s);
  const Scenario& s = *g.pick(ok);
  outcome.kind = std::string("misuse:") + s.name;
  const std::string repro = fmt::format(
      "// vtape_fuzz --seed {} --count 1   (misuse scenario \"{}\")\nusing namespace vt;\n"
      "Tensor x3 = Tensor::from_vector({{1, 2, 3}}, {{3}});\n{}\n",
      seed, s.name, s.code);
  g_current_repro = repro;
  auto report = [&](const std::string& msg) {
    Failure f{seed, s.category, msg, repro, opt.allow.count(s.category) > 0};
    outcome.failures.push_back(f);
  };
  try {
    s.run();
    if (s.expect_error) report("returned normally instead of raising vt::Error");
  } catch (const vt::Error& e) {
    if (!s.expect_error) report(std::string("raised vt::Error: ") + e.what());
  } catch (const std::exception& e) {
    report(fmt::format("threw {} (not vt::Error): {}", typeid(e).name(), e.what()));
  }
}

void Runner::run() {
  const double u = g.unif();
  p.mode = u < 0.38 ? "general" : u < 0.63 ? "smooth" : u < 0.78 ? "linalg" : u < 0.90 ? "batch" : "misuse";
  if (p.mode == "misuse") return misuse();
  generate_and_run();
  if (!outcome.failures.empty()) return;
  g_current_repro = program_text(p);
  const std::vector<Tensor> in = inputs();
  const Snapshot eager = guarded("eager", [&] { return interpret(p, in[0], in[1], in[2]); });
  if (!outcome.failures.empty()) return;
  if (eager.ok != (outcome.kind == "ok"))
    return fail("eager", "re-running the program changed its outcome: " + eager.error);
  oracle_jit(eager);
  if (p.mode != "batch") oracle_vmap(eager);
  if (p.mode == "smooth" && eager.ok) oracle_grad();
  if (g.chance(0.2)) oracle_nested_jit(eager);
}

}  // namespace

Outcome run_one(std::uint64_t seed, const Options& options) {
  g_current_seed = seed;
  Runner r(seed, options);
  try {
    r.run();
  } catch (const std::exception& e) {
    r.fail("harness", fmt::format("uncaught {}: {}", typeid(e).name(), e.what()));
  }
  return std::move(r.outcome);
}

void install_crash_handlers(unsigned timeout_s) {
  for (int sig : {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGALRM}) std::signal(sig, crash_handler);
  (void)timeout_s;
}

}  // namespace vtfuzz
