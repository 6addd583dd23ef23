#include "core/result.hpp"

#include <gtest/gtest.h>

namespace gf {
namespace {

TEST(Result, ErrorsCarryAKind) {
  EXPECT_EQ(make_error("x").kind, ErrorKind::Failed);  // the default: what an error without a kind always meant
  const Error e = make_error(ErrorKind::NotFound, "no lease l1");
  EXPECT_EQ(e.kind, ErrorKind::NotFound);
  EXPECT_EQ(e.message, "no lease l1");
  const Error wrapped = with_context("cannot release: ", e);
  EXPECT_EQ(wrapped.kind, ErrorKind::NotFound);
  EXPECT_EQ(wrapped.message, "cannot release: no lease l1");
  Result<int> r = make_error(ErrorKind::Unavailable, "not now");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::Unavailable);
  Result<void> v = make_error(ErrorKind::Invalid, "bad");
  EXPECT_EQ(v.error().kind, ErrorKind::Invalid);
  EXPECT_EQ(to_string(ErrorKind::NotReady), "not_ready");
}

}  // namespace
}  // namespace gf
