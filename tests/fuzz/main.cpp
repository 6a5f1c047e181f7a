// vtape_fuzz: runs the random-program fuzzer (fuzz.hpp) over a range of seeds and prints a
// summary: programs run, outcomes by kind, failures with their repros. Exit status 1 on any
// failure that is not in an --allow'ed category.
//
//   vtape_fuzz [--count N] [--seed S] [--allow CAT]... [--skip CAT]...
//              [--max-repros K] [--timeout SECONDS] [--quiet]
// Categories: eager jit vmap one-trace grad misuse bad-args harness, and the listed bugs being
// fixed then: overflow nested-jit jit-capture-grad (each now fails the run like any other).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "fuzz.hpp"

int main(int argc, char** argv) {
  std::uint64_t count = 2000, seed = 1;
  int max_repros = 20;
  unsigned timeout = 20;
  bool quiet = false;
  vtfuzz::Options opt;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto next = [&]() -> std::string {
      if (k + 1 >= argc) {
        std::fprintf(stderr, "vtape_fuzz: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++k];
    };
    if (a == "--count") count = std::stoull(next());
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--allow") opt.allow.insert(next());
    else if (a == "--skip") opt.skip.insert(next());
    else if (a == "--max-repros") max_repros = std::stoi(next());
    else if (a == "--timeout") timeout = static_cast<unsigned>(std::stoul(next()));
    else if (a == "--quiet") quiet = true;
    else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: vtape_fuzz [--count N] [--seed S] [--allow CAT]... [--skip CAT]...\n"
          "                  [--max-repros K] [--timeout SECONDS] [--quiet]\n");
      return 0;
    } else {
      std::fprintf(stderr, "vtape_fuzz: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  vtfuzz::install_crash_handlers(timeout);
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, int> kinds, checks, failing, known;
  std::map<std::string, std::string> first_seen;  // category + message head -> printed once
  int printed = 0, hard = 0, soft = 0;
  // Progress: a line per tenth of the run (at least every 1000 programs), so a long run shows it moves.
  const std::uint64_t every = std::max<std::uint64_t>(1, std::min<std::uint64_t>(1000, (count + 9) / 10));
  for (std::uint64_t s = seed; s < seed + count; ++s) {
    if (!quiet && s > seed && (s - seed) % every == 0) {
      const double so_far = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("vtape_fuzz: %llu of %llu programs in %.1f s, %d failures\n",
                  static_cast<unsigned long long>(s - seed), static_cast<unsigned long long>(count), so_far, hard);
      std::fflush(stdout);
    }
    if (timeout) alarm(timeout);
    const vtfuzz::Outcome o = vtfuzz::run_one(s, opt);
    ++kinds[o.kind];
    for (const auto& c : o.checks) ++checks[c];
    for (const auto& f : o.failures) {
      (f.known ? known : failing)[f.category]++;
      (f.known ? soft : hard)++;
      if (quiet || printed >= max_repros) continue;
      ++printed;
      std::printf("\n%s [%s] seed %llu: %s\n%s", f.known ? "KNOWN" : "FAIL", f.category.c_str(),
                  static_cast<unsigned long long>(f.seed), f.message.c_str(), f.repro.c_str());
    }
  }
  alarm(0);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n==== vtape_fuzz: %llu programs from seed %llu in %.1f s\n", static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(seed), secs);
  std::printf("outcomes:\n");
  for (const auto& [k, n] : kinds) std::printf("  %-40s %d\n", k.c_str(), n);
  std::printf("oracle checks run:\n");
  for (const auto& [k, n] : checks) std::printf("  %-40s %d\n", k.c_str(), n);
  std::printf("failures: %d (known/allowed: %d)\n", hard, soft);
  for (const auto& [k, n] : failing) std::printf("  FAIL  %-32s %d\n", k.c_str(), n);
  for (const auto& [k, n] : known) std::printf("  known %-32s %d\n", k.c_str(), n);
  return hard ? 1 : 0;
}
