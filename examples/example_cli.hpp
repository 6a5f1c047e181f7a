#pragma once
// Command-line handling shared by the examples, on CLI11: validators that read numbers strictly
// (the whole argument, decimal, within documented bounds), comma-separated lists without empty
// items, and the one-line error report every example's main prints before a non-zero exit.
//
// A bad command line gives one line on stderr, `<program>: <flag>: <problem>`, and CLI11's exit
// code for parse errors (100..127); --help prints the help on stdout and exits 0.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <new>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>
#include <vtape/vtape.hpp>

namespace cli {

// Every report is a single line: newlines become "; ", trailing ones are dropped.
inline std::string one_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  std::string out;
  for (char c : text) {
    if (c == '\n') out += "; ";
    else if (c != '\r') out += c;
  }
  return out;
}

// Prints `<program>: <what>` on stderr and returns the exit status for a failure (1).
inline int fail(std::string_view program, const std::string& what) {
  fmt::print(stderr, "{}: {}\n", program, one_line(what));
  return 1;
}

// For `catch (...)` at the top of main: reports the exception being handled on one line and
// returns the exit status (1). Every exception ends here, so no input ends in std::terminate.
inline int fail_with_current_exception(std::string_view program) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return fail(program, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {  // vt::Error included
    return fail(program, e.what());
  } catch (...) {
    return fail(program, "unknown exception");
  }
}

// Reads `text` as a decimal integer in [lo, hi] into `out`: the whole text, an optional '-' and
// digits only (no sign '+', no spaces, no hex or octal prefixes). Returns "" or the problem.
inline std::string read_int(std::string_view text, std::int64_t lo, std::int64_t hi, std::int64_t& out) {
  if (text.empty()) return "expected an integer, got an empty value";
  const char* first = text.data();
  const char* last = first + text.size();
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is out of range {}..{}", text, lo, hi);
  if (ec != std::errc() || end != last) return fmt::format("'{}' is not an integer", text);
  if (v < lo || v > hi) return fmt::format("{} is out of range {}..{}", v, lo, hi);
  out = v;
  return {};
}

// Reads `text` as a finite decimal number (as std::from_chars: no '+', no spaces, no hex floats).
inline std::string read_finite(std::string_view text, double& out) {
  if (text.empty()) return "expected a number, got an empty value";
  const char* first = text.data();
  const char* last = first + text.size();
  double v = 0;
  const auto [end, ec] = std::from_chars(first, last, v, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) return fmt::format("'{}' is out of range of a double", text);
  if (ec != std::errc() || end != last) return fmt::format("'{}' is not a number", text);
  if (!std::isfinite(v)) return fmt::format("'{}' is not a finite number", text);
  out = v;
  return {};
}

// Splits a comma-separated list; an empty list, an empty item or a trailing comma is a problem.
inline std::string split_list(std::string_view text, std::vector<std::string_view>& items) {
  items.clear();
  if (text.empty()) return "expected a comma-separated list, got an empty value";
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string_view item =
        text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) {
      if (comma == std::string_view::npos) return fmt::format("'{}' ends with a comma", text);
      return fmt::format("'{}' has an empty item {}", text, items.size() + 1);
    }
    items.push_back(item);
    if (comma == std::string_view::npos) return {};
    start = comma + 1;
  }
}

// An integer in [lo, hi]; the argument is rewritten in plain decimal before CLI11 converts it.
inline CLI::Validator integer(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        std::int64_t v = 0;
        std::string problem = read_int(text, lo, hi, v);
        if (problem.empty()) text = std::to_string(v);
        return problem;
      },
      "");
}

// An integer option in [lo, hi] named `type` in the help, whose text ends with the bounds.
template <class T>
CLI::Option* add_integer(CLI::App& app, const std::string& flag, T& value, std::int64_t lo, std::int64_t hi,
                         const std::string& type, const std::string& help) {
  return app.add_option(flag, value, fmt::format("{} ({}..{})", help, lo, hi))
      ->type_name(type)
      ->transform(integer(lo, hi))
      ->capture_default_str();
}

// A comma-separated list of 1..max_items integers in [lo, hi].
inline std::string read_int_list(std::string_view text, std::int64_t lo, std::int64_t hi, std::size_t max_items,
                                 std::vector<std::int64_t>& out) {
  std::vector<std::string_view> items;
  if (std::string problem = split_list(text, items); !problem.empty()) return problem;
  if (items.size() > max_items) return fmt::format("{} values, at most {} allowed", items.size(), max_items);
  out.clear();
  for (std::string_view item : items) {
    std::int64_t v = 0;
    if (std::string problem = read_int(item, lo, hi, v); !problem.empty()) return problem;
    out.push_back(v);
  }
  return {};
}

inline CLI::Validator integer_list(std::int64_t lo, std::int64_t hi, std::size_t max_items) {
  return CLI::Validator(
      [lo, hi, max_items](std::string& text) {
        std::vector<std::int64_t> values;
        return read_int_list(text, lo, hi, max_items, values);
      },
      "");
}

// A comma-separated list of exactly `count` finite numbers.
inline std::string read_number_list(std::string_view text, std::size_t count, std::vector<double>& out) {
  std::vector<std::string_view> items;
  if (std::string problem = split_list(text, items); !problem.empty()) return problem;
  out.clear();
  for (std::string_view item : items) {
    double v = 0;
    if (std::string problem = read_finite(item, v); !problem.empty()) return problem;
    out.push_back(v);
  }
  if (out.size() != count) return fmt::format("expected {} values, got {}", count, out.size());
  return {};
}

inline CLI::Validator number_list(std::size_t count) {
  return CLI::Validator(
      [count](std::string& text) {
        std::vector<double> values;
        return read_number_list(text, count, values);
      },
      "");
}

// cpu, cuda or cuda:N (vt::parse_device).
inline CLI::Validator device() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          vt::parse_device(text);
          return {};
        } catch (const std::exception& e) {
          return one_line(e.what());
        }
      },
      "");
}

// An app with the examples' conventions: -h/--help, a repeated option keeps its last value,
// unknown options and positional arguments are errors.
inline void configure(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.allow_extras(false);
  app.get_formatter()->column_width(34);
}

// Parses the command line. Returns nothing when the program should go on, or the exit status:
// 0 after --help (printed on stdout), CLI11's code after one line `<program>: <problem>` on stderr.
inline std::optional<int> parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fail(app.get_name(), e.what());
    return e.get_exit_code() != 0 ? e.get_exit_code() : 2;
  }
}

}  // namespace cli
