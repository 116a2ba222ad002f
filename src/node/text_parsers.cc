#include "src/node/text_parsers.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpunode::node {

std::optional<uint32_t> ParseHex(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  absl::ConsumePrefix(&text, "0x") || absl::ConsumePrefix(&text, "0X");
  if (text.empty() || text.size() > 8) return std::nullopt;
  uint32_t value = 0;
  for (char c : text) {
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else return std::nullopt;
    value = value * 16 + static_cast<uint32_t>(digit);
  }
  return value;
}

std::optional<unsigned> PcieGenFromSpeed(absl::string_view speed) {
  speed = absl::StripAsciiWhitespace(speed);
  size_t end = speed.find(' ');
  double gts = 0;
  if (!absl::SimpleAtod(speed.substr(0, end), &gts)) return std::nullopt;
  if (gts >= 60) return 6u;
  if (gts >= 30) return 5u;
  if (gts >= 15) return 4u;
  if (gts >= 7.5) return 3u;
  if (gts >= 4.5) return 2u;
  if (gts >= 2) return 1u;
  return std::nullopt;
}

std::vector<std::string> ParseProcModules(absl::string_view text) {
  std::vector<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    size_t sp = line.find(' ');
    names.emplace_back(line.substr(0, sp));
  }
  return names;
}

StatusOr<NvrmVersion> ParseNvrmVersion(absl::string_view text) {
  absl::string_view line = text.substr(0, text.find('\n'));
  if (!absl::StartsWith(line, "NVRM version:")) {
    return absl::DataLossError(
        "parse /proc/driver/nvidia/version: first line does not start with \"NVRM version:\"");
  }
  NvrmVersion out;
  out.line = std::string(absl::StripAsciiWhitespace(line));
  if (absl::StrContains(line, "Open Kernel Module")) {
    out.flavor = ModuleFlavor::kOpen;
  } else if (absl::StrContains(line, "Kernel Module")) {
    out.flavor = ModuleFlavor::kProprietary;
  }
  size_t module = line.find("Module");
  absl::string_view rest = module == absl::string_view::npos ? line : line.substr(module);
  for (absl::string_view token : absl::StrSplit(rest, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    if (!absl::StrContains(token, '.')) continue;
    auto v = Version::Parse(token);
    if (v.ok() && v->parts().size() >= 2 && v->parts().size() <= 3) {
      out.version = *v;
      return out;
    }
  }
  return absl::DataLossError(absl::StrCat(
      "parse /proc/driver/nvidia/version: no driver version in \"", out.line, "\" (truncated file?)"));
}

ProcGpu ParseProcGpuInformation(absl::string_view text) {
  ProcGpu g;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (key == "Model") g.model = std::string(value);
    else if (key == "GPU UUID") g.uuid = std::string(value);
    else if (key == "Bus Location") g.bus_id = absl::AsciiStrToLower(value);
    else if (key == "Device Minor") {
      unsigned m = 0;
      if (absl::SimpleAtoi(value, &m)) g.minor = m;
    } else if (key == "GPU Excluded") {
      g.excluded = absl::EqualsIgnoreCase(value, "Yes");
    }
  }
  return g;
}

std::optional<Version> DriverVersionFromLibraryPath(absl::string_view path) {
  size_t slash = path.rfind('/');
  absl::string_view name = slash == absl::string_view::npos ? path : path.substr(slash + 1);
  if (!absl::StartsWith(name, "libcuda.so.") && !absl::StartsWith(name, "libnvidia-")) {
    return std::nullopt;
  }
  size_t so = name.find(".so.");
  if (so == absl::string_view::npos) return std::nullopt;
  auto v = Version::Parse(name.substr(so + 4));
  if (!v.ok() || v->parts().size() < 2 || v->major() < 100) return std::nullopt;
  return *v;
}

std::optional<Version> CudaVersionFromHeader(absl::string_view header) {
  for (absl::string_view line : absl::StrSplit(header, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "#define")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "CUDA_VERSION")) continue;
    if (line.empty() || !absl::ascii_isspace(static_cast<unsigned char>(line[0]))) continue;
    int value = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &value) && value >= 1000) {
      return Version::FromCudaInt(value);
    }
  }
  return std::nullopt;
}

}  // namespace gpunode::node
