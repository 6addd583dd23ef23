#include "app/exit_codes.hpp"

#include <gtest/gtest.h>

namespace gf::app {
namespace {

// The README's exit code table, reached through the error kinds.
TEST(ExitCodes, EachKindExitsWithTheDocumentedCode) {
  EXPECT_EQ(exit_code(ErrorKind::Failed), 1);
  EXPECT_EQ(exit_code(ErrorKind::Invalid), 1);  // a bad file is not a bad command line
  EXPECT_EQ(exit_code(ErrorKind::NotFound), 1);
  EXPECT_EQ(exit_code(ErrorKind::NotReady), 1);
  EXPECT_EQ(exit_code(ErrorKind::Permission), 1);
  EXPECT_EQ(exit_code(ErrorKind::Usage), 2);
  EXPECT_EQ(exit_code(ErrorKind::Unsupported), 3);
  EXPECT_EQ(exit_code(ErrorKind::Unavailable), 75);
  EXPECT_EQ(exit_code(make_error("disk full")), kExitError);  // no kind given: an ordinary failure
  EXPECT_EQ(exit_code(make_error(ErrorKind::Unavailable, "Insufficient GPUs after waiting 1 s")), kExitNoGpus);
}

TEST(ExitCodes, ACommandThatCannotStart) {
  EXPECT_EQ(command_exit_code(ErrorKind::NotFound), 127);
  EXPECT_EQ(command_exit_code(ErrorKind::Permission), 126);
  EXPECT_EQ(command_exit_code(ErrorKind::Failed), 126);
}

}  // namespace
}  // namespace gf::app
