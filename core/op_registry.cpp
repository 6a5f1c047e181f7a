// Ops by name and by identity (core/graph.hpp, VT_REGISTER_OP), filled while the program's static objects are
// initialised, read afterwards.
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "graph.hpp"

namespace vt {

namespace {

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::string_view, OpRegistration> by_name;
  std::unordered_map<const OpDef*, OpRegistration> by_op;
};

// Constructed on first use: registrations run during static initialisation, in any file's order.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool register_op(const OpDef& op, std::string_view name, std::string_view attr_names) {
  // A plan text names the op with its inputs: how many it takes is what parse_plan checks before anything reads them.
  if (op.inputs == OpDef::undeclared_inputs)
    throw std::logic_error("vtape: the op " + std::string(name) +
                           " is registered without OpDef::inputs (how many inputs it takes)");
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const OpRegistration entry{&op, name, attr_names};
  const auto [it, added] = r.by_name.emplace(name, entry);
  // Two ops under one name would make a plan text ambiguous: a programming error, found at start-up.
  if (!added && it->second.op != &op)
    throw std::logic_error("vtape: two ops are registered under the name " + std::string(name));
  r.by_op.emplace(&op, entry);
  return true;
}

const OpRegistration* registered_op(std::string_view name) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.by_name.find(name);
  return it == r.by_name.end() ? nullptr : &it->second;
}

const OpRegistration* registration_of(const OpDef& op) {
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  const auto it = r.by_op.find(&op);
  return it == r.by_op.end() ? nullptr : &it->second;
}

}  // namespace vt
