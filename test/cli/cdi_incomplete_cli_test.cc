// `cdi generate` on a node whose driver libraries cannot be found (#14): exit 2 naming the problem
// and the way out, no spec written; --allow-incomplete writes the device-nodes-only spec.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace {

using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(CdiIncompleteCliTest, NoDriverLibraryFailsUnlessAllowed) {
  auto r = RunGpunode("--simulate broken-mismatch cdi generate --output -");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("no driver library (lib*.so.550.127.05) found under driver root"));
  EXPECT_THAT(r.out, HasSubstr("--allow-incomplete"));
  EXPECT_THAT(r.out, Not(HasSubstr("cdiVersion")));

  auto allowed = RunGpunode("--simulate broken-mismatch cdi generate --output - --allow-incomplete");
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out;
  EXPECT_THAT(allowed.out, HasSubstr("cdiVersion"));
  EXPECT_THAT(allowed.out, HasSubstr("containers get the device nodes only"));

  auto healthy = RunGpunode("--simulate dgx-h200 cdi generate --output -");
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out;
}

}  // namespace
