#include "src/base/terminal.h"

#include <string>

#include "gtest/gtest.h"

namespace gpunode {
namespace {

TEST(TerminalSafe, EscapeSequencesAreShownNotObeyed) {
  // Clear screen, set the window title, write the clipboard (OSC 52), a hyperlink (OSC 8).
  const std::string hostile =
      "gpu\x1b[2J\x1b]0;pwned\x07\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\";
  const std::string safe = TerminalSafe(hostile);
  EXPECT_EQ(safe.find('\x1b'), std::string::npos) << safe;
  EXPECT_EQ(safe.find('\x07'), std::string::npos) << safe;
  EXPECT_EQ(safe, "gpu\\x1b[2J\\x1b]0;pwned\\x07\\x1b]52;c;ZWNobyBvd25lZA==\\x07\\x1b]8;;http://x\\x1b\\link"
                  "\\x1b]8;;\\x1b\\");
}

TEST(TerminalSafe, C0AndC1ControlsAndBidiOverridesAreEscaped) {
  EXPECT_EQ(TerminalSafe("a\nb\tc\rd\x7f"), "a\\nb\\tc\\rd\\x7f");
  EXPECT_EQ(TerminalSafe(std::string("nul\0here", 8)), "nul\\x00here");
  // U+009B is CSI on terminals that take 8-bit controls; U+0085 is NEL.
  EXPECT_EQ(TerminalSafe("x\xc2\x9b" "2Jy\xc2\x85z"), "x\\u009b2Jy\\u0085z");
  // U+202E RIGHT-TO-LEFT OVERRIDE makes "gpu-exe.txt" read as something else.
  EXPECT_EQ(TerminalSafe("a\xe2\x80\xae" "b\xe2\x81\xa6" "c"), "a\\u202eb\\u2066c");
}

TEST(TerminalSafe, ValidUtf8IsKeptAndInvalidBytesAreShownAsHex) {
  EXPECT_EQ(TerminalSafe("NVIDIA H200 – 141 GB, Größe, 数据, 🚀"), "NVIDIA H200 – 141 GB, Größe, 数据, 🚀");
  EXPECT_EQ(TerminalSafe("bad\xff\xfe" "end"), "bad\\xff\\xfeend");
  EXPECT_EQ(TerminalSafe("\x9b" "2J"), "\\x9b2J");  // a raw C1 byte is not UTF-8: shown, not sent
  EXPECT_EQ(TerminalSafe("cut\xe2\x82"), "cut\\xe2\\x82");
  EXPECT_EQ(TerminalSafe("\xc0\xaf"), "\\xc0\\xaf");  // overlong '/'
  EXPECT_EQ(TerminalSafe("plain text, back\\slash"), "plain text, back\\slash");
}

TEST(TerminalSafe, IsIdempotent) {
  const std::string once = TerminalSafe("\x1b[31mred\x1b[0m\n\xff\xc2\x9b");
  EXPECT_EQ(TerminalSafe(once), once);
}

TEST(TerminalSafeText, KeepsLinesAndOurColoursOnly) {
  const std::string report = "\x1b[1mtitle\x1b[0m\n\tline \x1b[31merror\x1b[0m\n";
  EXPECT_EQ(TerminalSafeText(report, true), report);
  EXPECT_EQ(TerminalSafeText(report, false), "\\x1b[1mtitle\\x1b[0m\n\tline \\x1b[31merror\\x1b[0m\n");
  // Not colours: cursor moves, screen clears, OSC.
  EXPECT_EQ(TerminalSafeText("a\x1b[2Jb\x1b[1;1Hc\x1b]0;t\x07", true), "a\\x1b[2Jb\\x1b[1;1Hc\\x1b]0;t\\x07");
  EXPECT_EQ(TerminalSafeText("cr\rlf", true), "cr\\rlf");
}

}  // namespace
}  // namespace gpunode
