#include "estimate/estimate_params.hpp"

#include <gtest/gtest.h>

#include "unit/estimate/task_json_support.hpp"

#include "estimate/estimate.hpp"

namespace gf::estimate {
namespace {

using nlohmann::json;

constexpr Parallel kAll[] = {Parallel::Tp, Parallel::Pp, Parallel::Dp, Parallel::Cp, Parallel::Dcp};

// The seed's four spellings of each quantity, which must all be accepted.
TEST(EstimateParams, SeedAliasesAreAllAccepted) {
  const std::vector<std::pair<Parallel, std::vector<std::string>>> seed = {
      {Parallel::Tp, {"tensor-parallel-size", "tp-size", "tp_size", "tp"}},
      {Parallel::Pp, {"pipeline-parallel-size", "pp-size", "pp_size", "pp"}},
      {Parallel::Dp, {"data-parallel-size", "dp-size", "dp_size", "dp"}},
      {Parallel::Cp, {"context-parallel-size", "cp-size", "cp_size", "cp"}},
      {Parallel::Dcp, {"decode-context-parallel-size", "dcp-size", "dcp_size", "dcp"}},
  };
  for (const auto& [p, names] : seed) {
    const auto aliases = parallel_aliases(p);
    for (const auto& n : names) {
      EXPECT_NE(std::find(aliases.begin(), aliases.end(), n), aliases.end()) << n;
    }
  }
}

// Every alias × {scalar, list}: the quantity takes the value (a list's largest), the others stay 1.
TEST(EstimateParams, EveryAliasScalarAndList) {
  for (const Parallel p : kAll) {
    for (const std::string_view alias : parallel_aliases(p)) {
      for (const json& value : {json(4), json::array({1, 4, 2})}) {
        SCOPED_TRACE(std::string(alias) + " = " + value.dump());
        const json params = {{std::string(alias), value}};
        auto sizes = read_parallel_sizes(params);
        ASSERT_TRUE(sizes) << sizes.error().message;
        for (const Parallel q : kAll) EXPECT_EQ(sizes->get(q).value, q == p ? 4u : 1u) << parallel_name(q);
        EXPECT_EQ(sizes->get(p).key, alias);
        EXPECT_EQ(sizes->get(p).from_list, value.is_array());

        // And through the seed's rule: tp and pp multiply, dp/cp/dcp count through max(...).
        auto e = estimate(json{{"parameters", params}});
        ASSERT_TRUE(e) << e.error().message;
        EXPECT_EQ(e->gpus, 4u);
      }
    }
  }
}

TEST(EstimateParams, AbsentMeansOne) {
  auto sizes = read_parallel_sizes(json::object());
  ASSERT_TRUE(sizes);
  for (const Parallel q : kAll) {
    EXPECT_EQ(sizes->get(q).value, 1u);
    EXPECT_TRUE(sizes->get(q).key.empty());
  }
}

TEST(EstimateParams, UnknownKeysAreIgnored) {
  auto sizes = read_parallel_sizes(json{{"tp-size", 2}, {"mem-fraction-static", "whatever"}, {"tensor-size", "x"}});
  ASSERT_TRUE(sizes) << sizes.error().message;
  EXPECT_EQ(sizes->tp.value, 2u);
}

// One clear error for each kind of bad value, naming the key.
TEST(EstimateParams, BadValuesNameTheKey) {
  const std::vector<std::pair<json, std::string>> bad = {
      {json(0), "got 0"},
      {json(-2), "got -2"},
      {json(1.5), "got 1.5"},
      {json(2.0), "got 2.0"},
      {json("2"), "\"2\" (a string)"},
      {json(true), "true (a boolean)"},
      {json(nullptr), "got null"},
      {json::object(), "an object"},
      {json::array(), "empty list"},
      {json::array({1, "2", 4}), "element 2 of the list is \"2\""},
      {json::array({1, json::array({2})}), "element 2 of the list is a list of 1"},
      {json::array({1, false}), "element 2 of the list is false"},
      {json(kMaxParallelSize + 1), "up to 65536"},
  };
  for (const std::string_view key : {"tp-size", "dcp", "pipeline_parallel_size"}) {
    for (const auto& [value, detail] : bad) {
      SCOPED_TRACE(std::string(key) + " = " + value.dump());
      auto sizes = read_parallel_sizes(json{{std::string(key), value}});
      ASSERT_FALSE(sizes);
      EXPECT_NE(sizes.error().message.find("'" + std::string(key) + "'"), std::string::npos) << sizes.error().message;
      EXPECT_NE(sizes.error().message.find(detail), std::string::npos) << sizes.error().message;
    }
  }
}

TEST(EstimateParams, TwoAliasesTakeTheLargestAndRecordBoth) {
  auto sizes = read_parallel_sizes(json{{"tp", 2}, {"tensor-parallel-size", json::array({1, 8})}});
  ASSERT_TRUE(sizes);
  EXPECT_EQ(sizes->tp.value, 8u);
  EXPECT_EQ(sizes->tp.key, "tensor-parallel-size");
  EXPECT_TRUE(sizes->tp.from_list);
  ASSERT_EQ(sizes->tp.other_keys.size(), 1u);
  EXPECT_EQ(sizes->tp.other_keys[0], "tp");

  // The explanation says so.
  auto e = estimate(json{{"parameters", {{"tp", 2}, {"tp_size", 8}}}});
  ASSERT_TRUE(e);
  EXPECT_EQ(e->gpus, 8u);
  EXPECT_NE(e->explanation.find("tp given more than once ('tp_size', 'tp'); using the largest, 8"), std::string::npos)
      << e->explanation;
}

TEST(EstimateParams, FractionsSwitchesAndStrings) {
  constexpr std::string_view keys[] = {"gpu-memory-utilization", "gpu_memory_utilization"};
  auto f = read_fraction(json{{"gpu-memory-utilization", json::array({0.5, 0.85})}}, keys);
  ASSERT_TRUE(f);
  ASSERT_TRUE(*f);
  EXPECT_DOUBLE_EQ((*f)->value, 0.85);
  auto one = read_fraction(json{{"gpu_memory_utilization", 1}}, keys);
  ASSERT_TRUE(one && *one);
  EXPECT_DOUBLE_EQ((*one)->value, 1.0);
  for (const json& bad : {json(0), json(1.2), json(-0.5), json("0.9"), json(true), json::array()}) {
    auto r = read_fraction(json{{"gpu_memory_utilization", bad}}, keys);
    ASSERT_FALSE(r) << bad.dump();
    EXPECT_NE(r.error().message.find("'gpu_memory_utilization'"), std::string::npos);
  }
  EXPECT_FALSE(read_fraction(json::object(), keys)->has_value());

  constexpr std::string_view sw[] = {"enable-dp-attention"};
  EXPECT_TRUE((*read_switch(json{{"enable-dp-attention", true}}, sw))->value);
  // A sweep with an experiment without the switch needs what that experiment needs.
  EXPECT_FALSE((*read_switch(json{{"enable-dp-attention", json::array({true, false})}}, sw))->value);
  EXPECT_FALSE(read_switch(json{{"enable-dp-attention", "true"}}, sw));

  constexpr std::string_view str[] = {"kv-cache-dtype"};
  auto s = read_strings(json{{"kv-cache-dtype", json::array({"auto", "fp8"})}}, str);
  ASSERT_TRUE(s && *s);
  EXPECT_EQ((*s)->value.size(), 2u);
  EXPECT_FALSE(read_strings(json{{"kv-cache-dtype", 8}}, str));
}

TEST(EstimateParams, DescribeIsBoundedAndSafe) {
  EXPECT_EQ(describe_json(json(std::string(100, 'a'))), "\"" + std::string(40, 'a') + "\"… (a string)");
  // Cutting inside a multi-byte character must not throw.
  EXPECT_NO_THROW(describe_json(json(std::string(39, 'a') + "\xc3\xa9")));
  EXPECT_EQ(describe_json(json::array({1, 2, 3})), "a list of 3");
}

}  // namespace
}  // namespace gf::estimate
