// Printing: tensors against numpy's own text for the same arrays (tests/data/print/cases.txt, from
// tools/reference/make_print_reference.py), the print options, and the jit summaries' printers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>
#include <vtape/vtape.hpp>

using namespace vt;

namespace {

struct PrintCase {
  std::string name;
  DType dtype = DType::f64;
  Shape shape;
  bool batched = false;
  PrintOptions options;
  int spec = -1;
  std::vector<std::string> values;
  std::string expected;
};

std::vector<PrintCase> read_print_cases() {
  std::ifstream in(VTAPE_TEST_DATA "/print/cases.txt");
  REQUIRE(in);
  std::vector<PrintCase> cases;
  std::string line;
  std::getline(in, line);  // the header comment
  while (std::getline(in, line)) {
    PrintCase c;
    REQUIRE(line.rfind("case ", 0) == 0);
    c.name = line.substr(5);
    std::string key, word;
    auto next_line = [&]() -> std::istringstream {
      REQUIRE(std::getline(in, line));
      std::istringstream words(line);
      words >> key;
      return words;
    };
    std::istringstream w = next_line();
    w >> word;
    c.dtype = word == "f32" ? DType::f32 : word == "i64" ? DType::i64 : word == "i32" ? DType::i32 : DType::f64;
    w = next_line();
    for (std::int64_t d; w >> d;) c.shape.push_back(d);
    w = next_line();
    int batched = 0;
    w >> batched;
    c.batched = batched != 0;
    w = next_line();
    w >> c.options.precision >> c.options.threshold >> c.options.edgeitems >> c.options.linewidth;
    w = next_line();
    w >> c.spec;
    w = next_line();
    while (w >> word) c.values.push_back(word);
    w = next_line();
    int lines = 0;
    w >> lines;
    for (int i = 0; i < lines; ++i) {
      REQUIRE(std::getline(in, line));
      c.expected += (i ? "\n" : "") + line;
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

Tensor tensor_of(const PrintCase& c) {
  Tensor t;
  if (c.dtype == DType::i64 || c.dtype == DType::i32) {
    std::vector<std::int64_t> v;
    for (const std::string& s : c.values) v.push_back(std::stoll(s));
    t = Tensor::from_ints(v, c.shape, c.dtype);
  } else {
    std::vector<double> v;
    for (const std::string& s : c.values) v.push_back(std::strtod(s.c_str(), nullptr));
    t = Tensor::from_vector(v, c.shape, c.dtype);
  }
  return c.batched ? as_batch(t) : t;
}

}  // namespace

TEST_CASE("tensors print as numpy prints the same arrays", "[print]") {
  const std::vector<PrintCase> cases = read_print_cases();
  REQUIRE(cases.size() >= 50);
  for (const PrintCase& c : cases) {
    INFO(c.name);
    const PrintOptionsScope scope(c.options);
    const Tensor t = tensor_of(c);
    const std::string text =
        c.spec >= 0 ? fmt::format(fmt::runtime("{:." + std::to_string(c.spec) + "}"), t) : fmt::format("{}", t);
    CHECK(text == c.expected);
  }
}

TEST_CASE("a large tensor prints summarised, in lines of the set width", "[print]") {
  {
    PrintOptions o = print_options();
    o.edgeitems = std::int64_t{1} << 62;  // more than any axis: nothing is cut, nothing overflows
    o.threshold = 0;
    const PrintOptionsScope scope(o);
    CHECK(fmt::format("{}", arange(0, 3)) == "Tensor([0., 1., 2.], shape=[3], dtype=float64)");
  }
  // The report that started this: a 100 x 100 tensor printed as one line of 101,802 characters.
  const Tensor big = randn({1000, 1000}, 5);
  const std::string text = fmt::format("{}", big);
  std::istringstream lines(text);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) CHECK(line.size() <= 75);
  CHECK(count <= 13);  // 3 leading rows, "...", 3 trailing rows, each on at most two lines
  CHECK(text.size() < 1000);
  CHECK(text.find("...") != std::string::npos);
  {
    PrintOptions o = print_options();
    o.threshold = 2'000'000;
    const PrintOptionsScope whole(o);
    const std::string all = fmt::format("{}", randn({30, 30}, 5));
    CHECK(std::count(all.begin(), all.end(), '.') == 900);  // every element, none summarised
  }
}

TEST_CASE("print options: numpy's defaults, checked values, restored by a scope", "[print]") {
  const PrintOptions d = print_options();
  CHECK(d.precision == 8);
  CHECK(d.threshold == 1000);
  CHECK(d.edgeitems == 3);
  CHECK(d.linewidth == 75);
  const Tensor third = Tensor::from_vector({1.0 / 3}, {1});
  CHECK(fmt::format("{}", third) == "Tensor([0.33333333], dtype=float64)");
  {
    PrintOptions o = d;
    o.precision = 3;
    const PrintOptionsScope scope(o);
    CHECK(print_options().precision == 3);
    CHECK(fmt::format("{}", third) == "Tensor([0.333], dtype=float64)");
    CHECK(fmt::format("{:.5}", third) == "Tensor([0.33333], dtype=float64)");  // the spec wins for one call
  }
  CHECK(print_options().precision == 8);
  CHECK(fmt::format("{}", third) == "Tensor([0.33333333], dtype=float64)");

  auto refused = [&](auto change, const std::string& field) {
    PrintOptions o = d;
    change(o);
    CHECK_THROWS_WITH(set_print_options(o), Catch::Contains("set_print_options: " + field));
    CHECK(print_options().precision == d.precision);  // nothing changed
  };
  refused([](PrintOptions& o) { o.precision = -1; }, "precision is -1");
  refused([](PrintOptions& o) { o.precision = 65; }, "precision is 65");
  refused([](PrintOptions& o) { o.threshold = -1; }, "threshold is -1");
  refused([](PrintOptions& o) { o.edgeitems = -2; }, "edgeitems is -2");
  refused([](PrintOptions& o) { o.edgeitems = 0; }, "edgeitems is 0; it must be >= 1");
  refused([](PrintOptions& o) { o.linewidth = 0; }, "linewidth is 0");
}

TEST_CASE("a format spec other than a precision is an error", "[print]") {
  const Tensor t = ones({2});
  CHECK_THROWS_AS(fmt::format(fmt::runtime("{:x}"), t), fmt::format_error);
  CHECK_THROWS_AS(fmt::format(fmt::runtime("{:.}"), t), fmt::format_error);
  CHECK_THROWS_AS(fmt::format(fmt::runtime("{:.65}"), t), fmt::format_error);
  CHECK(fmt::format(fmt::runtime("{:.1}"), t) == "Tensor([1., 1.], dtype=float64)");
}

TEST_CASE("undefined, traced and folded tensors print what they are", "[print]") {
  CHECK(fmt::format("{}", Tensor()) == "Tensor(undefined)");
  std::string traced, batched, folded;
  auto f = jit([&](const Tensor& x, const Tensor& p) {
    traced = fmt::format("{}", x);
    batched = fmt::format("{}", p);
    const Tensor c = exp(zeros({2}));  // a constant op: recorded while tracing, computed to print
    folded = fmt::format("{}", c);
    return sum(x) + p * c;
  });
  f(ones({3}), as_batch(ones({4, 2})));
  CHECK(traced == "Tensor(traced, shape=[3], dtype=float64)");
  CHECK(batched == "Tensor(traced, shape=[2], dtype=float64, batched)");
  CHECK(folded == "Tensor([1., 1.], dtype=float64)");
}

TEST_CASE("PlanSummary and JitCounters print every field by name", "[print]") {
  auto step =
      jit(value_and_grad([](const Tensor& p) { return sum(vmap([](const Tensor& q) { return sum(exp(q)); })(p)); }));
  const Tensor P = as_batch(randn({5, 3}, 1));
  const PlanSummary s = step.compile(P);
  step(P);
  step(as_batch(randn({9, 3}, 2)));
  const JitCounters c = step.counters();

  auto fields = [](const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::istringstream words(line);
      std::string name, value;
      words >> name >> value;
      out[name] = value;
    }
    return out;
  };
  const auto summary = fields(fmt::format("{}", s));
  CHECK(summary.size() == 13);
  REQUIRE(!s.passes.empty());
  CHECK(summary.at("passes") == s.passes[0] + (s.passes.size() > 1 ? "," : ""));
  // The rewrites by pass, by name: the first (in name order) and its count.
  REQUIRE(!s.rewrites.empty());
  CHECK(summary.at("rewrites") == s.rewrites.begin()->first);
  CHECK(fmt::format("{}", s).find(fmt::format("{} {}", s.rewrites.begin()->first, s.rewrites.begin()->second)) !=
        std::string::npos);
  CHECK(summary.at("traced_ops") == std::to_string(s.traced_ops));
  CHECK(summary.at("steps") == std::to_string(s.steps));
  CHECK(summary.at("kernels") == std::to_string(s.kernels));
  CHECK(summary.at("fused") == std::to_string(s.fused));
  CHECK(summary.at("arena_bytes_per_example") == std::to_string(s.arena_bytes_per_example));
  CHECK(summary.at("arena_bytes_fixed") == std::to_string(s.arena_bytes_fixed));
  CHECK(s.traced_ops > 0);

  const auto counters = fields(fmt::format("{}", c));
  CHECK(counters.size() == 10);
  CHECK(counters.at("calls") == "2");
  CHECK(counters.at("traces") == "1");
  CHECK(counters.at("cache_hits") == std::to_string(c.cache_hits));
  CHECK(counters.at("trace_ms") == fmt::format("{:.3f}", c.trace_ms));
  CHECK(counters.at("chunked_calls") == std::to_string(c.chunked_calls));
}
