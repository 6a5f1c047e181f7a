#pragma once
// vtape random-program fuzzer: the public interface shared by the `vtape_fuzz` driver (the
// `fuzz_budget` ctest and tools/fuzz).
//
// A program is a short list of instructions over registers (three input tensors, then one
// register per instruction). run_one(seed) generates a program from the seed while running it
// eagerly, then checks it against the oracles:
//   - eager: the only outcomes are a result or a vt::Error (any other exception is a failure);
//     instructions built to be invalid (overflowing / negative sizes, bad axes, ...) must raise;
//   - jit: the jitted program equals eager (bitwise, NaN == NaN; a tiny tolerance when matmuls,
//     linear algebra or reductions are involved), on the first (tracing) and second (cached) call;
//   - vmap: vmap(f)(X)[i] equals f(X[i]) for batch sizes 0, 1 and more (elementwise results are
//     the same bits at every length, special values included);
//   - nested vmap: vmap(vmap(f)) with an outer axis of size 1 equals vmap(f);
//   - one trace: jit(vmap(f)) over batch sizes 1, 2, 5 traces once and equals eager vmap;
//   - gradients (smooth float64 programs): reverse mode equals central finite differences; jitted
//     gradients equal eager ones; grad through a jitted function that captures the tracked
//     argument equals plain grad;
//   - forward mode and second derivatives (the same programs): jvp along random tangents equals
//     the gradient's inner product with them, and (every fourth seed) an hvp equals central
//     differences of the gradient;
//   - loops (every fourth smooth program): the loss as a scan's body, the other inputs read from
//     outside, gives the loss, and its gradient through the scan (eager and jit) equals grad's;
//   - nested jit: a jitted function calling another jitted function equals eager;
//   - misuse scenarios (undefined tensors, grad of a non-scalar, ...) raise vt::Error.
// Every failure carries the seed and a repro: the program as C++ source.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace vtfuzz {

struct Options {
  // Categories whose failures are reported but do not fail the run (for triage while a bug is
  // being fixed; the ctest allows none): e.g. "overflow", "nested-jit", "jit-capture-grad".
  std::set<std::string> allow;
  // Categories not even generated (so that a crashing category does not hide the others).
  std::set<std::string> skip;
};

struct Failure {
  std::uint64_t seed = 0;
  std::string category;  // "eager", "jit", "vmap", "one-trace", "grad", "overflow", ...
  std::string message;   // what the oracle saw
  std::string repro;     // the program as C++ source
  bool known = false;    // category in Options::allow
};

struct Outcome {
  std::string kind;                 // "ok", "error:<op>" (eager vt::Error at op), "misuse:<scenario>", ...
  std::vector<std::string> checks;  // oracles that ran on this program
  std::vector<Failure> failures;
};

// Generates and checks one program. Never throws.
Outcome run_one(std::uint64_t seed, const Options& options);

// Installs SIGSEGV/SIGABRT/SIGFPE/SIGALRM handlers that print the repro of the program being run
// (prepared before running it) and exit non-zero; `timeout_s` > 0 arms a per-program alarm.
void install_crash_handlers(unsigned timeout_s);

}  // namespace vtfuzz
