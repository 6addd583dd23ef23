#pragma once
// A Prometheus instant-query answer as its HTTP API writes it (`{"status":"success","data":{"resultType":
// "vector","result":[...]}}`) around the given series, each a JSON object; and the same answer parsed by
// the Prometheus source, for the tests of what it makes of the series.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/prometheus_source.hpp"

namespace gf::test {

inline std::string prom_answer_text(const std::vector<std::string>& series) {
  std::string body = R"({"status":"success","data":{"resultType":"vector","result":[)";
  for (std::size_t i = 0; i < series.size(); ++i) body += (i ? "," : "") + series[i];
  return body + "]}}";
}

inline std::vector<cluster::PromSample> parsed_prom_answer(const std::vector<std::string>& series) {
  auto parsed = cluster::parse_instant_query(prom_answer_text(series));
  EXPECT_TRUE(parsed) << parsed.error().message;
  return parsed ? *parsed : std::vector<cluster::PromSample>{};
}

}  // namespace gf::test
