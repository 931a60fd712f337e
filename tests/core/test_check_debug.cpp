// NABLA_CHECK in a build without NDEBUG (a debug build): the message ends with the check's file and
// line. This file undefines NDEBUG before the error header, as a debug build of the library would.
#undef NDEBUG
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "core/error.h"

namespace {

// A type of this file only, so that the check_failed instantiations below are this file's own and
// do not collide with the release-mode ones of other files.
struct Here {};
std::ostream& operator<<(std::ostream& os, Here) { return os << "here"; }

TEST(Errors, CheckMacroNamesItsSourceLineInDebugBuilds) {
  std::string msg;
  try {
    NABLA_CHECK(nabla::ValueError, 2 + 2 == 5, "op: bad argument ", Here{});
  } catch (const nabla::ValueError& e) { msg = e.what(); }
  EXPECT_EQ(msg.rfind("op: bad argument here (", 0), 0u) << msg;
  EXPECT_NE(msg.find("test_check_debug.cpp:"), std::string::npos) << msg;
  EXPECT_EQ(msg.back(), ')') << msg;
}

}  // namespace
