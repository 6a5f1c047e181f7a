// vtape fuzzer: interpreter and printer of the program representation (program.hpp). The printer
// writes exactly the calls the interpreter makes, so a repro pasted into a test does the same.
#include "program.hpp"

#include <cmath>
#include <fmt/format.h>

namespace vtfuzz {

using vt::Tensor;

const char* op_name(Op op) {
  switch (op) {
    case Op::Const: return "from_vector";
    case Op::Undef: return "undefined";
    case Op::FromBlobNeg: return "from_blob";
    case Op::Neg: return "neg";
    case Op::Exp: return "exp";
    case Op::Log: return "log";
    case Op::Log1p: return "log1p";
    case Op::Sqrt: return "sqrt";
    case Op::Square: return "square";
    case Op::Sin: return "sin";
    case Op::Cos: return "cos";
    case Op::Tanh: return "tanh";
    case Op::Abs: return "abs";
    case Op::Sign: return "sign";
    case Op::StopGrad: return "stop_gradient";
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::Pow: return "pow";
    case Op::Maximum: return "maximum";
    case Op::Less: return "less";
    case Op::Greater: return "greater";
    case Op::Equal: return "equal";
    case Op::AddS: return "add(scalar)";
    case Op::SubS: return "sub(scalar)";
    case Op::MulS: return "mul(scalar)";
    case Op::DivS: return "div(scalar)";
    case Op::PowS: return "pow(scalar)";
    case Op::RAddS: return "scalar+";
    case Op::RSubS: return "scalar-";
    case Op::RMulS: return "scalar*";
    case Op::RDivS: return "scalar/";
    case Op::Where: return "where";
    case Op::Astype: return "astype";
    case Op::Sum: return "sum";
    case Op::Mean: return "mean";
    case Op::Max: return "max";
    case Op::SumTo: return "sum_to";
    case Op::Reshape: return "reshape";
    case Op::Transpose: return "transpose";
    case Op::Permute: return "transpose(perm)";
    case Op::Swapaxes: return "swapaxes";
    case Op::T: return "t";
    case Op::BroadcastTo: return "broadcast_to";
    case Op::Slice: return "slice";
    case Op::Concat: return "concatenate";
    case Op::Stack: return "stack";
    case Op::Diag: return "diag";
    case Op::Diagonal: return "diagonal";
    case Op::Tril: return "tril";
    case Op::Triu: return "triu";
    case Op::Matmul: return "matmul";
    case Op::MakeSpd: return "make_spd";
    case Op::Cholesky: return "cholesky";
    case Op::CholL: return "cholesky_checked.l";
    case Op::CholInfo: return "cholesky_checked.info";
    case Op::ChoSolve: return "cho_solve";
    case Op::LogdetF: return "logdet(factor)";
    case Op::Logdet: return "logdet";
    case Op::Solve: return "solve";
    case Op::TriSolve: return "triangular_solve";
    case Op::Zeros: return "zeros";
    case Op::Ones: return "ones";
    case Op::Full: return "full";
    case Op::Eye: return "eye";
    case Op::Arange: return "arange";
    case Op::Linspace: return "linspace";
    case Op::Randn: return "randn";
    case Op::Rand: return "rand";
    case Op::AsBatch: return "as_batch";
    case Op::Unbatch: return "unbatch";
    case Op::BatchSum: return "batch_sum";
    case Op::BatchMean: return "batch_mean";
    case Op::BatchMax: return "batch_max";
    case Op::BroadcastToBatch: return "broadcast_to_batch";
  }
  return "?";
}

bool op_eager_only(Op op) { return op == Op::FromBlobNeg || op == Op::AsBatch || op == Op::Unbatch; }
bool op_batch_family(Op op) {
  return op == Op::AsBatch || op == Op::Unbatch || op == Op::BatchSum || op == Op::BatchMean || op == Op::BatchMax ||
         op == Op::BroadcastToBatch || op == Op::FromBlobNeg;
}
bool op_approx(Op op) {
  switch (op) {
    case Op::Sum:
    case Op::Mean:
    case Op::SumTo:
    case Op::Matmul:
    case Op::MakeSpd:
    case Op::Cholesky:
    case Op::CholL:
    case Op::ChoSolve:
    case Op::LogdetF:
    case Op::Logdet:
    case Op::Solve:
    case Op::TriSolve:
    case Op::BatchSum:
    case Op::BatchMean: return true;
    default: return false;
  }
}

namespace {
double blob[64];  // backing memory of the from_blob instructions (never read: their shapes are invalid)
}

Tensor make_input(const InputSpec& in) {
  Tensor t = Tensor::from_vector(in.vals, in.shape, in.dt);
  return in.batched ? vt::as_batch(t) : t;
}

Tensor exec(const Instr& in, const std::vector<Tensor>& R) {
  auto A = [&](std::size_t k) -> const Tensor& { return R.at(static_cast<std::size_t>(in.a.at(k))); };
  const auto& I = in.i;
  const auto& S = in.r;
  auto list = [&] {
    std::vector<Tensor> xs;
    for (int k : in.a) xs.push_back(R.at(static_cast<std::size_t>(k)));
    return xs;
  };
  switch (in.op) {
    case Op::Const: return Tensor::from_vector(in.vals, I, in.dt);
    case Op::Undef: return Tensor();
    case Op::FromBlobNeg: return Tensor::from_blob(blob, I, in.dt);
    case Op::Neg: return vt::neg(A(0));
    case Op::Exp: return vt::exp(A(0));
    case Op::Log: return vt::log(A(0));
    case Op::Log1p: return vt::log1p(A(0));
    case Op::Sqrt: return vt::sqrt(A(0));
    case Op::Square: return vt::square(A(0));
    case Op::Sin: return vt::sin(A(0));
    case Op::Cos: return vt::cos(A(0));
    case Op::Tanh: return vt::tanh(A(0));
    case Op::Abs: return vt::abs(A(0));
    case Op::Sign: return vt::sign(A(0));
    case Op::StopGrad: return vt::stop_gradient(A(0));
    case Op::Add: return vt::add(A(0), A(1));
    case Op::Sub: return vt::sub(A(0), A(1));
    case Op::Mul: return vt::mul(A(0), A(1));
    case Op::Div: return vt::div(A(0), A(1));
    case Op::Pow: return vt::pow(A(0), A(1));
    case Op::Maximum: return vt::maximum(A(0), A(1));
    // Comparisons give bools; the program goes on with them as 0/1 floats, as a model multiplies by a mask.
    case Op::Less: return vt::astype(vt::less(A(0), A(1)), vt::promote(A(0).dtype(), A(1).dtype()));
    case Op::Greater: return vt::astype(vt::greater(A(0), A(1)), vt::promote(A(0).dtype(), A(1).dtype()));
    case Op::Equal: return vt::astype(vt::equal(A(0), A(1)), vt::promote(A(0).dtype(), A(1).dtype()));
    case Op::AddS: return vt::add(A(0), S[0]);
    case Op::SubS: return vt::sub(A(0), S[0]);
    case Op::MulS: return vt::mul(A(0), S[0]);
    case Op::DivS: return vt::div(A(0), S[0]);
    case Op::PowS: return vt::pow(A(0), S[0]);
    case Op::RAddS: return S[0] + A(0);
    case Op::RSubS: return S[0] - A(0);
    case Op::RMulS: return S[0] * A(0);
    case Op::RDivS: return S[0] / A(0);
    case Op::Where: return vt::where(A(0), A(1), A(2));
    case Op::Astype: return vt::astype(A(0), in.dt);
    case Op::Sum: return vt::sum(A(0), vt::Axes(I.begin() + 1, I.end()), I[0] != 0);
    case Op::Mean: return vt::mean(A(0), vt::Axes(I.begin() + 1, I.end()), I[0] != 0);
    case Op::Max: return vt::max(A(0), vt::Axes(I.begin() + 1, I.end()), I[0] != 0);
    case Op::SumTo: return vt::sum_to(A(0), I);
    case Op::Reshape: return vt::reshape(A(0), I);
    case Op::Transpose: return vt::transpose(A(0));
    case Op::Permute: return vt::transpose(A(0), I);
    case Op::Swapaxes: return vt::swapaxes(A(0), I[0], I[1]);
    case Op::T: return A(0).t();
    case Op::BroadcastTo: return vt::broadcast_to(A(0), I);
    case Op::Slice: return vt::slice(A(0), I[0], I[1], I[2], I[3]);
    case Op::Concat: return vt::concatenate(list(), I[0]);
    case Op::Stack: return vt::stack(list(), I[0]);
    case Op::Diag: return vt::diag(A(0));
    case Op::Diagonal: return vt::diagonal(A(0));
    case Op::Tril: return vt::tril(A(0), I[0]);
    case Op::Triu: return vt::triu(A(0), I[0]);
    case Op::Matmul: return vt::matmul(A(0), A(1));
    case Op::MakeSpd: return vt::matmul(A(0), A(0).t()) + vt::eye(I[0], A(0).dtype()) * static_cast<double>(I[0]);
    case Op::Cholesky: return vt::cholesky(A(0));
    case Op::CholL: return vt::cholesky_checked(A(0)).l;
    case Op::CholInfo: return vt::cholesky_checked(A(0)).info;
    case Op::ChoSolve: return vt::cho_solve(vt::cho_factor(A(0)), A(1));
    case Op::LogdetF: return vt::logdet(vt::cho_factor(A(0)));
    case Op::Logdet: return vt::logdet(A(0));
    case Op::Solve: return vt::solve(A(0), A(1));
    case Op::TriSolve: return vt::triangular_solve(A(0), A(1), I[0] != 0, I[1] != 0, I[2] != 0);
    case Op::Zeros: return vt::zeros(I, in.dt);
    case Op::Ones: return vt::ones(I, in.dt);
    case Op::Full: return vt::full(I, S[0], in.dt);
    case Op::Eye: return vt::eye(I[0], in.dt);
    case Op::Arange: return vt::arange(S[0], S[1], S[2], in.dt);
    case Op::Linspace: return vt::linspace(S[0], S[1], I[0], in.dt);
    case Op::Randn: return vt::randn(I, static_cast<std::uint64_t>(S[0]), in.dt);
    case Op::Rand: return vt::rand(I, static_cast<std::uint64_t>(S[0]), in.dt);
    case Op::AsBatch: return vt::as_batch(A(0));
    case Op::Unbatch: return vt::unbatch(A(0));
    case Op::BatchSum: return vt::batch_sum(A(0));
    case Op::BatchMean: return vt::batch_mean(A(0));
    case Op::BatchMax: return vt::batch_max(A(0));
    case Op::BroadcastToBatch: return vt::broadcast_to_batch(A(0), A(1));
  }
  throw std::logic_error("vtfuzz: unknown op");
}

std::vector<Tensor> interpret(const Program& p, const Tensor& a, const Tensor& b, const Tensor& c) {
  std::vector<Tensor> R{a, b, c};
  R.reserve(3 + p.code.size());
  for (const Instr& in : p.code) R.push_back(exec(in, R));
  std::vector<Tensor> out;
  for (int k : p.outputs) out.push_back(R.at(static_cast<std::size_t>(k)));
  return out;
}

// ------------------------------------------------------------------ printing
std::string num(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  std::string s = fmt::format("{:.17g}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string values_text(const std::vector<double>& v) {
  std::string s = "{";
  for (std::size_t k = 0; k < v.size(); ++k) s += (k ? ", " : "") + num(v[k]);
  return s + "}";
}

namespace {
std::string int_text(std::int64_t v) {
  if (v == INT64_MAX) return "INT64_MAX";
  if (v == INT64_MIN) return "INT64_MIN";
  for (int b = 31; b < 63; ++b)
    if (v == (std::int64_t{1} << b)) return fmt::format("(std::int64_t{{1}} << {})", b);
  return std::to_string(v);
}
template <class It>
std::string ints_text(It b, It e) {
  std::string s = "{";
  for (auto it = b; it != e; ++it) s += (it == b ? "" : ", ") + int_text(*it);
  return s + "}";
}
std::string dt_text(vt::DType d) { return d == vt::DType::f32 ? "DType::f32" : "DType::f64"; }
}  // namespace

std::string shape_text(const vt::Shape& s) { return ints_text(s.begin(), s.end()); }

std::string input_text(const InputSpec& in) {
  std::string t =
      fmt::format("Tensor::from_vector({}, {}, {})", values_text(in.vals), shape_text(in.shape), dt_text(in.dt));
  return in.batched ? "as_batch(" + t + ")" : t;
}

std::string instr_text(const Instr& in, int reg) {
  auto r = [&](std::size_t k) { return fmt::format("r{}", in.a.at(k)); };
  const auto& I = in.i;
  const auto& S = in.r;
  std::string e;
  const std::string axes = I.empty() ? "" : ints_text(I.begin() + 1, I.end());
  switch (in.op) {
    case Op::Const:
      e = fmt::format("Tensor::from_vector({}, {}, {})", values_text(in.vals), shape_text(I), dt_text(in.dt));
      break;
    case Op::Undef: e = "Tensor()"; break;
    case Op::FromBlobNeg: e = fmt::format("Tensor::from_blob(buffer, {}, {})", shape_text(I), dt_text(in.dt)); break;
    case Op::Neg:
    case Op::Exp:
    case Op::Log:
    case Op::Log1p:
    case Op::Sqrt:
    case Op::Square:
    case Op::Sin:
    case Op::Cos:
    case Op::Tanh:
    case Op::Abs:
    case Op::Sign:
    case Op::StopGrad:
    case Op::Cholesky:
    case Op::Logdet:
    case Op::Diag:
    case Op::Diagonal:
    case Op::Transpose:
    case Op::AsBatch:
    case Op::Unbatch:
    case Op::BatchSum:
    case Op::BatchMean:
    case Op::BatchMax: e = fmt::format("{}({})", op_name(in.op), r(0)); break;
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Pow:
    case Op::Maximum:
    case Op::Less:
    case Op::Greater:
    case Op::Equal:
    case Op::Matmul:
    case Op::Solve:
    case Op::BroadcastToBatch: e = fmt::format("{}({}, {})", op_name(in.op), r(0), r(1)); break;
    case Op::AddS: e = fmt::format("add({}, {})", r(0), num(S[0])); break;
    case Op::SubS: e = fmt::format("sub({}, {})", r(0), num(S[0])); break;
    case Op::MulS: e = fmt::format("mul({}, {})", r(0), num(S[0])); break;
    case Op::DivS: e = fmt::format("div({}, {})", r(0), num(S[0])); break;
    case Op::PowS: e = fmt::format("pow({}, {})", r(0), num(S[0])); break;
    case Op::RAddS: e = fmt::format("{} + {}", num(S[0]), r(0)); break;
    case Op::RSubS: e = fmt::format("{} - {}", num(S[0]), r(0)); break;
    case Op::RMulS: e = fmt::format("{} * {}", num(S[0]), r(0)); break;
    case Op::RDivS: e = fmt::format("{} / {}", num(S[0]), r(0)); break;
    case Op::Where: e = fmt::format("where({}, {}, {})", r(0), r(1), r(2)); break;
    case Op::Astype: e = fmt::format("astype({}, {})", r(0), dt_text(in.dt)); break;
    case Op::Sum:
    case Op::Mean:
    case Op::Max: e = fmt::format("{}({}, {}, {})", op_name(in.op), r(0), axes, I[0] ? "true" : "false"); break;
    case Op::SumTo: e = fmt::format("sum_to({}, {})", r(0), shape_text(I)); break;
    case Op::Reshape: e = fmt::format("reshape({}, {})", r(0), shape_text(I)); break;
    case Op::Permute: e = fmt::format("transpose({}, {})", r(0), shape_text(I)); break;
    case Op::Swapaxes: e = fmt::format("swapaxes({}, {}, {})", r(0), int_text(I[0]), int_text(I[1])); break;
    case Op::T: e = fmt::format("{}.t()", r(0)); break;
    case Op::BroadcastTo: e = fmt::format("broadcast_to({}, {})", r(0), shape_text(I)); break;
    case Op::Slice:
      e = fmt::format("slice({}, {}, {}, {}, {})", r(0), int_text(I[0]), int_text(I[1]), int_text(I[2]),
                      int_text(I[3]));
      break;
    case Op::Concat:
    case Op::Stack: {
      std::string xs;
      for (std::size_t k = 0; k < in.a.size(); ++k) xs += (k ? ", " : "") + r(k);
      e = fmt::format("{}({{{}}}, {})", op_name(in.op), xs, int_text(I[0]));
      break;
    }
    case Op::Tril:
    case Op::Triu: e = fmt::format("{}({}, {})", op_name(in.op), r(0), int_text(I[0])); break;
    case Op::MakeSpd: e = fmt::format("matmul({0}, {0}.t()) + eye({1}, {0}.dtype()) * {1}.0", r(0), I[0]); break;
    case Op::CholL: e = fmt::format("cholesky_checked({}).l", r(0)); break;
    case Op::CholInfo: e = fmt::format("cholesky_checked({}).info", r(0)); break;
    case Op::ChoSolve: e = fmt::format("cho_solve(cho_factor({}), {})", r(0), r(1)); break;
    case Op::LogdetF: e = fmt::format("logdet(cho_factor({}))", r(0)); break;
    case Op::TriSolve:
      e = fmt::format("triangular_solve({}, {}, /*lower=*/{}, /*transpose=*/{}, /*left=*/{})", r(0), r(1),
                      I[0] ? "true" : "false", I[1] ? "true" : "false", I[2] ? "true" : "false");
      break;
    case Op::Zeros:
    case Op::Ones: e = fmt::format("{}({}, {})", op_name(in.op), shape_text(I), dt_text(in.dt)); break;
    case Op::Full: e = fmt::format("full({}, {}, {})", shape_text(I), num(S[0]), dt_text(in.dt)); break;
    case Op::Eye: e = fmt::format("eye({}, {})", int_text(I[0]), dt_text(in.dt)); break;
    case Op::Arange: e = fmt::format("arange({}, {}, {}, {})", num(S[0]), num(S[1]), num(S[2]), dt_text(in.dt)); break;
    case Op::Linspace:
      e = fmt::format("linspace({}, {}, {}, {})", num(S[0]), num(S[1]), int_text(I[0]), dt_text(in.dt));
      break;
    case Op::Randn:
    case Op::Rand:
      e = fmt::format("{}({}, {}, {})", op_name(in.op), shape_text(I), static_cast<std::uint64_t>(S[0]),
                      dt_text(in.dt));
      break;
  }
  std::string line = fmt::format("    Tensor r{} = {};", reg, e);
  if (!in.expect.empty()) line += "  // must raise vt::Error";
  return line;
}

std::string program_text(const Program& p, std::size_t upto) {
  std::string s = fmt::format("// vtape_fuzz --seed {} --count 1   (mode {})\n", p.seed, p.mode);
  s += "using namespace vt;\n";
  for (std::size_t k = 0; k < p.inputs.size(); ++k) s += fmt::format("Tensor in{} = {};\n", k, input_text(p.inputs[k]));
  s += "auto f = [&](Tensor r0, Tensor r1, Tensor r2) {\n";
  const std::size_t n = std::min(upto, p.code.size());
  for (std::size_t k = 0; k < n; ++k) s += instr_text(p.code[k], static_cast<int>(3 + k)) + "\n";
  std::string outs;
  for (std::size_t k = 0; k < p.outputs.size(); ++k) outs += fmt::format("{}r{}", k ? ", " : "", p.outputs[k]);
  s += fmt::format("    return std::vector<Tensor>{{{}}};\n}};\n", outs);
  return s;
}

}  // namespace vtfuzz
