#pragma once
// vtape fuzzer: the program representation, its interpreter (one function run eagerly and inside
// jit / vmap / grad) and its printer (the repro: the program as C++ source).
#include <cstdint>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

namespace vtfuzz {

enum class Op : int {
  Const,
  Undef,
  FromBlobNeg,
  Neg,
  Exp,
  Log,
  Log1p,
  Sqrt,
  Square,
  Sin,
  Cos,
  Tanh,
  Abs,
  Sign,
  StopGrad,
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Maximum,
  Less,
  Greater,
  Equal,
  AddS,
  SubS,
  MulS,
  DivS,
  PowS,
  RAddS,
  RSubS,
  RMulS,
  RDivS,
  Where,
  Astype,
  Sum,
  Mean,
  Max,
  SumTo,
  Reshape,
  Transpose,
  Permute,
  Swapaxes,
  T,
  BroadcastTo,
  Slice,
  Concat,
  Stack,
  Diag,
  Diagonal,
  Tril,
  Triu,
  Matmul,
  MakeSpd,
  Cholesky,
  CholL,
  CholInfo,
  ChoSolve,
  LogdetF,
  Logdet,
  Solve,
  TriSolve,
  Zeros,
  Ones,
  Full,
  Eye,
  Arange,
  Linspace,
  Randn,
  Rand,
  AsBatch,
  Unbatch,
  BatchSum,
  BatchMean,
  BatchMax,
  BroadcastToBatch,
};

const char* op_name(Op op);
bool op_eager_only(Op op);    // cannot run on traced tensors by design (as_batch, unbatch, from_blob)
bool op_batch_family(Op op);  // reads or makes the batch: excluded from the vmap oracle
bool op_approx(Op op);        // results may be reassociated (matmul, linear algebra, sums)

struct Instr {
  explicit Instr(Op op = Op::Const) : op(op) {}  // the other fields start empty
  Op op;
  std::vector<int> a;             // operand registers
  std::vector<std::int64_t> i;    // integer attrs: axes, shapes, flags
  std::vector<double> r;          // real attrs: scalars
  vt::DType dt = vt::DType::f64;  // creation / astype dtype
  std::vector<double> vals;       // Const values
  std::string expect;             // non-empty: must raise vt::Error (the category if it does not)
};

struct InputSpec {
  vt::Shape shape;  // full shape; when batched, shape[0] is B
  vt::DType dt = vt::DType::f64;
  std::vector<double> vals;
  bool batched = false;
};

struct Program {
  std::uint64_t seed = 0;
  std::string mode;
  std::vector<InputSpec> inputs;  // always 3
  std::vector<Instr> code;        // instruction k writes register 3 + k
  std::vector<int> outputs;
};

vt::Tensor make_input(const InputSpec& in);
vt::Tensor exec(const Instr& in, const std::vector<vt::Tensor>& regs);
// Runs the program on three input tensors and returns its outputs.
std::vector<vt::Tensor> interpret(const Program& p, const vt::Tensor& a, const vt::Tensor& b, const vt::Tensor& c);

std::string num(double v);
std::string values_text(const std::vector<double>& v);
std::string shape_text(const vt::Shape& s);
std::string input_text(const InputSpec& in);
std::string instr_text(const Instr& in, int reg);
// The program as C++: the inputs r0..r2 and `auto f = [&](Tensor r0, Tensor r1, Tensor r2) {...}`.
std::string program_text(const Program& p, std::size_t upto = SIZE_MAX);

}  // namespace vtfuzz
