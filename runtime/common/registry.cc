// The process-wide actor type registry (see spotlight/actor.h).
#include <map>
#include <mutex>

#include "spotlight/actor.h"

namespace spotlight::detail {
namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, ActorTypeInfo> types;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

void register_actor_type(ActorTypeInfo info) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  // A type registered twice (a header included by two libraries) keeps its first entry.
  r.types.emplace(info.name, std::move(info));
}

const ActorTypeInfo* find_actor_type(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.types.find(name);
  return it == r.types.end() ? nullptr : &it->second;
}

std::vector<std::string> actor_type_names() {
  Registry& r = registry();
  std::lock_guard<std::mutex> l(r.mu);
  std::vector<std::string> names;
  for (const auto& [n, _] : r.types) names.push_back(n);
  return names;
}

}  // namespace spotlight::detail
