// ASSERT_OK(expr) / EXPECT_OK(expr) for absl::Status and absl::StatusOr<T>: on failure they print
// the expression and the status (code and message). `expr` is evaluated once; a message can be
// streamed after either macro, as with gtest's own assertions:  ASSERT_OK(Load(path)) << path;
// (Debian 12's libabsl-dev has no absl/status/status_matchers.h, hence these.)
#ifndef GPUNODE_TEST_TESTING_STATUS_MATCHERS_H_
#define GPUNODE_TEST_TESTING_STATUS_MATCHERS_H_

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpunode::testing {

inline const absl::Status& StatusOf(const absl::Status& status) { return status; }

template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

// The predicate-formatter behind ASSERT_OK / EXPECT_OK (gtest's *_PRED_FORMAT1 evaluates its
// argument once).
inline ::testing::AssertionResult IsOkFormat(const char* expr, const absl::Status& status) {
  if (status.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << expr << " is not OK: " << status;
}

template <typename T>
::testing::AssertionResult IsOkFormat(const char* expr, const absl::StatusOr<T>& status_or) {
  return IsOkFormat(expr, status_or.status());
}

}  // namespace gpunode::testing

#define ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::gpunode::testing::IsOkFormat, expr)
#define EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::gpunode::testing::IsOkFormat, expr)

#endif  // GPUNODE_TEST_TESTING_STATUS_MATCHERS_H_
