// Actor registration: invokers call the right method with decoded arguments,
// refuse wrong arguments, and member pointers map back to names.
#include <gtest/gtest.h>

#include "hello_actors.h"
#include "spotlight/actor.h"
#include "support/test_actors.h"

namespace spotlight {
namespace {

TEST(Registry, TypesFromLinkedLibrariesAreRegistered) {
  EXPECT_NE(detail::find_actor_type("hello::Counter"), nullptr);
  EXPECT_NE(detail::find_actor_type("testing_actors::Worker"), nullptr);
  EXPECT_EQ(detail::find_actor_type("NoSuchType"), nullptr);
  EXPECT_EQ(actor_type_name<hello::Counter>(), "hello::Counter");
}

TEST(Registry, InvokerRunsTheMethod) {
  const auto* type = detail::find_actor_type("hello::Counter");
  ASSERT_NE(type, nullptr);
  auto instance = type->create();
  auto& add = type->methods.at("add");
  EXPECT_EQ(unpack<int64_t>(add(instance.get(), pack(std::make_tuple(int64_t{5})), nullptr)), 5);
  EXPECT_EQ(unpack<int64_t>(add(instance.get(), pack(std::make_tuple(int64_t{7})), nullptr)), 12);
  auto tally = unpack<hello::Tally>(type->methods.at("get")(instance.get(), pack(std::make_tuple()), nullptr));
  EXPECT_EQ(tally.value, 12);
  EXPECT_EQ(tally.calls, 2);
}

TEST(Registry, WrongArgumentsAreRefused) {
  const auto* type = detail::find_actor_type("hello::Counter");
  auto instance = type->create();
  auto& add = type->methods.at("add");
  EXPECT_THROW(add(instance.get(), pack(std::make_tuple()), nullptr), BadArguments);
  EXPECT_THROW(add(instance.get(), pack(std::make_tuple(1, 2)), nullptr), BadArguments);
  EXPECT_THROW(add(instance.get(), pack(std::make_tuple(std::string("five"))), nullptr), BadArguments);
  EXPECT_THROW(add(instance.get(), std::string("\xc1"), nullptr), BadArguments);
}

TEST(Registry, MethodNamesFromMemberPointers) {
  EXPECT_EQ(detail::method_name(&hello::Counter::add), "add");
  EXPECT_EQ(detail::method_name(&hello::Counter::get), "get");
  EXPECT_EQ(detail::method_name(&testing_actors::Worker::twice), "twice");
}

TEST(Registry, ExceptionsPropagateFromTheMethod) {
  const auto* type = detail::find_actor_type("testing_actors::Worker");
  auto instance = type->create();
  EXPECT_THROW(type->methods.at("fail")(instance.get(), pack(std::make_tuple(std::string("boom"))), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace spotlight
