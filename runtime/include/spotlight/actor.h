// Actor types: a plain C++ class whose methods are registered by name.
//
//   struct Counter { int add(int x); int get() const; };
//   SPOTLIGHT_ACTOR(Counter, add, get)     // in one .cc file of the actor library
//
// The macro registers a factory (the default constructor) and one invoker per
// method, which unpacks msgpack arguments, calls the method and packs its
// result. A node that loads the library can host the type; a driver that links
// it can call the methods by member pointer (`h.call(&Counter::add, 5)`).
// Overloaded methods cannot be registered (the member pointer is ambiguous).
//
// A stateful actor that must survive the loss of its machine declares two
// hooks, found by name:
//   std::string save() const;             // called after every task it ran
//   void restore(std::string_view state); // called on a new incarnation
// The head keeps the latest saved state; an actor re-placed after a crash or
// a drain is restored from it before it takes its next task.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "spotlight/codec.h"
#include "spotlight/task.h"

namespace spotlight {

// Arguments that do not match the method's parameters; reaches the caller as RejectedError.
struct BadArguments : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {

// Runs one method: unpacks `args`, calls it on `self` (passing `ctx` to methods
// that take a TaskContext&), packs the result.
using Invoker = std::function<std::string(void* self, std::string_view args, TaskContext* ctx)>;

struct ActorTypeInfo {
  std::string name;
  std::function<std::shared_ptr<void>()> create;
  std::unordered_map<std::string, Invoker> methods;
  // Empty unless the type declares save() and restore().
  std::function<std::string(const void* self)> save;
  std::function<void(void* self, std::string_view state)> restore;
};

template <class C>
concept Checkpointable = requires(C& c, const C& cc, std::string_view s) {
  { cc.save() } -> std::convertible_to<std::string>;
  c.restore(s);
};

// The process-wide registry lives in libspotlight_runtime.so, shared by the
// node and every actor library it loads.
void register_actor_type(ActorTypeInfo info);
const ActorTypeInfo* find_actor_type(const std::string& name);
std::vector<std::string> actor_type_names();

// The parameters a caller passes: all but a leading TaskContext&.
template <class... A>
struct call_params {
  static constexpr bool takes_context = false;
  using args = std::tuple<std::decay_t<A>...>;
};
template <class... A>
struct call_params<TaskContext&, A...> {
  static constexpr bool takes_context = true;
  using args = std::tuple<std::decay_t<A>...>;
};

template <class M>
struct method_traits;
#define SPOTLIGHT_METHOD_TRAITS_(QUALS)                                       \
  template <class C, class R, class... A>                                     \
  struct method_traits<R (C::*)(A...) QUALS> {                                \
    using cls = C;                                                            \
    using ret = R;                                                            \
    using args = typename call_params<A...>::args;                            \
    static constexpr bool takes_context = call_params<A...>::takes_context;   \
  };
SPOTLIGHT_METHOD_TRAITS_()
SPOTLIGHT_METHOD_TRAITS_(const)
SPOTLIGHT_METHOD_TRAITS_(noexcept)
SPOTLIGHT_METHOD_TRAITS_(const noexcept)
#undef SPOTLIGHT_METHOD_TRAITS_

// Member pointer -> method name, one table per member-pointer type.
template <class M>
std::vector<std::pair<M, std::string>>& method_table() {
  static std::vector<std::pair<M, std::string>> table;
  return table;
}

template <class A>
std::string& actor_type_name() {
  static std::string name;
  return name;
}

template <class M>
const std::string& method_name(M m) {
  for (const auto& [ptr, name] : method_table<M>()) {
    if (ptr == m) return name;
  }
  throw std::invalid_argument("method is not registered with SPOTLIGHT_ACTOR");
}

template <class Tuple>
Tuple unpack_args(std::string_view bytes, const std::string& where) {
  try {
    msgpack::object_handle oh = detail::unpack_bounded(bytes);
    const msgpack::object& o = oh.get();
    if (o.type != msgpack::type::ARRAY || o.via.array.size != std::tuple_size_v<Tuple>) {
      throw BadArguments(where + " takes " + std::to_string(std::tuple_size_v<Tuple>) +
                         " argument(s)");
    }
    return o.as<Tuple>();
  } catch (const BadArguments&) {
    throw;
  } catch (const std::exception& e) {
    throw BadArguments(where + ": arguments do not match the parameter types (" + e.what() + ")");
  }
}

template <class C, class M>
std::pair<std::string, Invoker> method(const char* name, M m) {
  using Tr = method_traits<M>;
  method_table<M>().emplace_back(m, name);
  std::string where = actor_type_name<C>() + "." + name;
  Invoker inv = [m, where](void* self, std::string_view bytes, TaskContext* ctx) -> std::string {
    auto args = unpack_args<typename Tr::args>(bytes, where);
    C* obj = static_cast<C*>(self);
    auto call = [&](auto&... a) -> decltype(auto) {
      if constexpr (Tr::takes_context) {
        if (!ctx) throw std::logic_error(where + " needs a TaskContext");
        return (obj->*m)(*ctx, a...);
      } else {
        return (obj->*m)(a...);
      }
    };
    if constexpr (std::is_void_v<typename Tr::ret>) {
      std::apply(call, args);
      return pack(msgpack::type::nil_t());
    } else {
      return pack(std::apply(call, args));
    }
  };
  return {name, std::move(inv)};
}

template <class C>
bool register_actor(const char* name, std::vector<std::pair<std::string, Invoker>> methods) {
  ActorTypeInfo info;
  info.name = name;
  info.create = [] { return std::static_pointer_cast<void>(std::make_shared<C>()); };
  for (auto& [n, inv] : methods) info.methods.emplace(n, std::move(inv));
  if constexpr (Checkpointable<C>) {
    info.save = [](const void* self) { return std::string(static_cast<const C*>(self)->save()); };
    info.restore = [](void* self, std::string_view s) { static_cast<C*>(self)->restore(s); };
  }
  register_actor_type(std::move(info));
  return true;
}

template <class C>
bool set_actor_type_name(const char* name) {
  actor_type_name<C>() = name;
  return true;
}

}  // namespace detail

// The registered name of actor type A; throws if A was never registered.
template <class A>
const std::string& actor_type_name() {
  const std::string& n = detail::actor_type_name<A>();
  if (n.empty()) throw std::invalid_argument("actor type is not registered with SPOTLIGHT_ACTOR");
  return n;
}

}  // namespace spotlight

// ---- registration macro ----------------------------------------------------
#define SPOTLIGHT_CAT2_(a, b) a##b
#define SPOTLIGHT_CAT_(a, b) SPOTLIGHT_CAT2_(a, b)
#define SPOTLIGHT_PARENS_ ()
#define SPOTLIGHT_EXPAND_(...) SPOTLIGHT_EXPAND3_(SPOTLIGHT_EXPAND3_(SPOTLIGHT_EXPAND3_(__VA_ARGS__)))
#define SPOTLIGHT_EXPAND3_(...) SPOTLIGHT_EXPAND2_(SPOTLIGHT_EXPAND2_(SPOTLIGHT_EXPAND2_(__VA_ARGS__)))
#define SPOTLIGHT_EXPAND2_(...) SPOTLIGHT_EXPAND1_(SPOTLIGHT_EXPAND1_(SPOTLIGHT_EXPAND1_(__VA_ARGS__)))
#define SPOTLIGHT_EXPAND1_(...) __VA_ARGS__
#define SPOTLIGHT_FOR_EACH_(macro, T, ...) \
  __VA_OPT__(SPOTLIGHT_EXPAND_(SPOTLIGHT_FOR_EACH_HELPER_(macro, T, __VA_ARGS__)))
#define SPOTLIGHT_FOR_EACH_HELPER_(macro, T, a1, ...) \
  macro(T, a1) __VA_OPT__(SPOTLIGHT_FOR_EACH_AGAIN_ SPOTLIGHT_PARENS_(macro, T, __VA_ARGS__))
#define SPOTLIGHT_FOR_EACH_AGAIN_() SPOTLIGHT_FOR_EACH_HELPER_
#define SPOTLIGHT_METHOD_ENTRY_(T, m) ::spotlight::detail::method<T>(#m, &T::m),

// Registers actor type `Type` and the listed methods (names, not pointers).
#define SPOTLIGHT_ACTOR(Type, ...)                                                   \
  [[maybe_unused]] static const bool SPOTLIGHT_CAT_(spotlight_actor_name_, __LINE__) = \
      ::spotlight::detail::set_actor_type_name<Type>(#Type);                         \
  [[maybe_unused]] static const bool SPOTLIGHT_CAT_(spotlight_actor_, __LINE__) =     \
      ::spotlight::detail::register_actor<Type>(                                      \
          #Type, {SPOTLIGHT_FOR_EACH_(SPOTLIGHT_METHOD_ENTRY_, Type, __VA_ARGS__)});
