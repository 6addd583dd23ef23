#include "estimate/task.hpp"

#include <gtest/gtest.h>

#include <string>

namespace gf::estimate {
namespace {

TEST(Task, ParsesEveryShape) {
  auto t = parse_task(R"({"b": [1, -2, 2.0, "x", true, null], "a": {"k": 1}})");
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_TRUE(t->is_object());
  EXPECT_EQ(t->members()[0].key, "a");  // sorted by key
  const auto* b = t->find("b");
  ASSERT_TRUE(b && b->is_array());
  ASSERT_EQ(b->size(), 6u);
  EXPECT_TRUE((*b)[0].is_number_unsigned());
  EXPECT_EQ(natural((*b)[0]), 1u);
  EXPECT_TRUE((*b)[1].is_number_integer() && !(*b)[1].is_number_unsigned());
  EXPECT_FALSE(natural((*b)[1]));
  EXPECT_TRUE((*b)[2].is_number_float());
  EXPECT_FALSE(natural((*b)[2]));  // 2.0 is not an integer
  EXPECT_EQ((*b)[3].get_string(), "x");
  EXPECT_TRUE((*b)[4].get_bool());
  EXPECT_TRUE((*b)[5].is_null());
  EXPECT_EQ(t->find("nope"), nullptr);
  EXPECT_EQ(b->find("a"), nullptr);  // not an object
  EXPECT_EQ(to_json_text(*t), R"({"a":{"k":1},"b":[1,-2,2.0,"x",true,null]})");
}

TEST(Task, ErrorsAreInvalidAndSayWhy) {
  auto bad = parse_task("{");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::Invalid);
  EXPECT_EQ(bad.error().message.rfind("task file: invalid JSON: ", 0), 0u) << bad.error().message;
  auto list = parse_task("[1, 2]");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().message, "task: expected a JSON object, got a list of 2");
  auto scalar = parse_task("7");
  ASSERT_FALSE(scalar);
  EXPECT_EQ(scalar.error().message, "task: expected a JSON object, got 7");
  // Depth is bounded, so that no recursion over a value can exhaust the stack.
  const std::string deep = "{\"a\": " + std::string(kMaxTaskDepth, '[') + std::string(kMaxTaskDepth, ']') + "}";
  auto too_deep = parse_task(deep);
  ASSERT_FALSE(too_deep);
  EXPECT_EQ(too_deep.error().message, "task file: nested deeper than 64 levels");
  const std::string ok = "{\"a\": " + std::string(kMaxTaskDepth - 1, '[') + std::string(kMaxTaskDepth - 1, ']') + "}";
  EXPECT_TRUE(parse_task(ok));
}

TEST(Task, ObjectsKeepTheLastOfEqualKeysAndSetReplaces) {
  auto o = TaskValue::object({{"b", 1}, {"a", 2}, {"b", 3}});
  ASSERT_EQ(o.size(), 2u);
  EXPECT_EQ(natural(*o.find("b")), 3u);
  o.set("a", "x");
  o.set("c", TaskValue::List{1, 2});
  EXPECT_EQ(to_json_text(o), R"({"a":"x","b":3,"c":[1,2]})");
  TaskValue n;
  n.set("k", true);  // null becomes an object
  EXPECT_TRUE(n.is_object() && n.find("k")->get_bool());
}

TEST(Task, DescribeIsShort) {
  EXPECT_EQ(describe_value(TaskValue(2.0)), "2.0");
  EXPECT_EQ(describe_value(TaskValue(-3)), "-3");
  EXPECT_EQ(describe_value(TaskValue(true)), "true (a boolean)");
  EXPECT_EQ(describe_value(TaskValue::object()), "an object");
  EXPECT_EQ(describe_value(TaskValue(std::string(50, 'z'))), "\"" + std::string(40, 'z') + "\"… (a string)");
}

}  // namespace
}  // namespace gf::estimate
