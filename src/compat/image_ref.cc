#include "src/compat/image_ref.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/compat/coverage.h"

namespace gpunode::compat {
namespace {

constexpr size_t kMaxReference = 512;

// `text` with control and non-ASCII bytes replaced by '?', safe to quote in messages and JSON.
std::string Printable(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c < ' ' || c == 0x7f || static_cast<unsigned char>(c) >= 0x80) c = '?';
  }
  return out;
}

Status BadRef(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("image \"", Printable(text.substr(0, 200)), "\" is not an image reference: ", why,
                   " (expected [REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST], e.g. "
                   "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime)"));
}

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

// Docker path component: [a-z0-9]+ ((\.|_|__|-+)[a-z0-9]+)*
bool ValidPathComponent(absl::string_view c) {
  if (c.empty() || !IsLowerAlnum(c.front()) || !IsLowerAlnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (IsLowerAlnum(ch) || ch == '-') continue;
    if (ch == '.' || ch == '_') {
      // a separator must be followed by alnum, except "__"
      if (ch == '_' && i + 1 < c.size() && c[i + 1] == '_') {
        ++i;
        if (i + 1 >= c.size() || !IsLowerAlnum(c[i + 1])) return false;
        continue;
      }
      if (i + 1 >= c.size() || !IsLowerAlnum(c[i + 1])) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool ValidDomain(absl::string_view d) {
  if (d.empty() || d.size() > 255) return false;
  for (char c : d) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '[' || c == ']')) {
      return false;
    }
  }
  return true;
}

bool ValidTag(absl::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!(absl::ascii_isalnum(static_cast<unsigned char>(t[0])) || t[0] == '_')) return false;
  for (char c : t) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
          c == '-')) {
      return false;
    }
  }
  return true;
}

std::string InspectHint(absl::string_view ref) {
  return absl::StrCat("the CUDA version the image was built with: run `docker inspect --format "
                      "'{{range .Config.Env}}{{println .}}{{end}}' ",
                      ref, " | grep CUDA_VERSION` and pass it as --cuda X.Y[.Z]");
}

WorkloadSpec Unknown(WorkloadSpec spec, std::string reason, std::vector<std::string> needed) {
  spec.cuda.reset();
  spec.derived_from = std::move(reason);
  spec.needed = std::move(needed);
  return spec;
}

// "known family F, release "T" is not in the data set (data covers A–B, N releases)".
std::string NotInDataSet(const CompatData& data, absl::string_view family, absl::string_view tag) {
  const ImageFamily* f = data.FindFamily(family);
  std::string label = f && !f->label.empty() ? f->label : std::string(family);
  std::string covers = "the data set has no releases of it yet";
  if (f) {
    FamilyCoverage c = ImageFamilyCoverage(data, *f);
    if (c.count > 0) covers = absl::StrCat("data covers ", CoverageSummary(c));
  }
  return absl::StrCat("known family ", label, ", release \"", tag, "\" not in the data set (",
                      covers, ")");
}

std::string FrameworkOf(absl::string_view family) {
  if (absl::StrContains(family, "tensorflow")) return "tensorflow";
  if (absl::StrContains(family, "/jax")) return "jax";
  if (absl::StrContains(family, "nemo")) return "nemo";
  if (absl::StrContains(family, "tensorrt-llm")) return "tensorrt-llm";
  if (absl::StrContains(family, "sglang")) return "sglang";
  if (absl::StrContains(family, "text-generation-inference")) return "text-generation-inference";
  if (absl::StrContains(family, "tritonserver")) return "tritonserver";
  if (absl::StrContains(family, "pytorch")) return "pytorch";
  return "";
}

WorkloadSpec FromRelease(WorkloadSpec spec, const ImageRelease& r, absl::string_view tag) {
  spec.cuda = r.cuda;
  spec.source = r.provenance.source;
  spec.confidence = r.provenance.confidence;
  spec.derived_from = absl::StrCat("CUDA ", r.cuda.ToString(), " for ", r.family, ":", tag,
                                   " from the data set");
  if (!r.min_driver.empty()) {
    absl::StrAppend(&spec.derived_from, "; its release notes state driver ", r.min_driver);
  }
  if (!r.forward_compat.empty()) {
    absl::StrAppend(&spec.derived_from, " (data-center forward compatibility: ",
                    absl::StrJoin(r.forward_compat, ", "), ")");
  }
  return spec;
}

// "YY.MM" at the start of an NGC tag.
bool IsMonth(absl::string_view s) {
  return s.size() == 5 && IsDigit(s[0]) && IsDigit(s[1]) && s[2] == '.' && IsDigit(s[3]) &&
         IsDigit(s[4]);
}

std::optional<Version> ParseVersionOpt(absl::string_view text, size_t min_parts, size_t max_parts) {
  auto v = Version::Parse(text);
  if (!v.ok() || v->parts().size() < min_parts || v->parts().size() > max_parts) {
    return std::nullopt;
  }
  return *v;
}

WorkloadSpec ParseCudaTag(WorkloadSpec spec, absl::string_view tag) {
  std::vector<absl::string_view> parts = absl::StrSplit(tag, '-');
  std::optional<Version> cuda = ParseVersionOpt(parts[0], 2, 4);
  if (!cuda) {
    return Unknown(std::move(spec),
                   absl::StrCat("the tag \"", tag,
                                "\" does not start with a CUDA version (nvidia/cuda tags look like "
                                "12.4.1-cudnn-runtime-ubuntu22.04)"),
                   {InspectHint(spec.input)});
  }
  spec.cuda = cuda->Truncate(3);
  size_t i = 1;
  if (i < parts.size() && (parts[i] == "base" || parts[i] == "runtime" || parts[i] == "devel")) {
    spec.flavor = std::string(parts[i++]);
  } else if (i < parts.size() && absl::StartsWith(parts[i], "cudnn")) {
    absl::string_view n = parts[i].substr(5);
    spec.cudnn = n.empty() ? "unversioned" : std::string(n);
    spec.flavor = std::string(parts[i++]);
    if (i < parts.size() && (parts[i] == "runtime" || parts[i] == "devel")) {
      absl::StrAppend(&spec.flavor, "-", parts[i++]);
    }
  }
  if (i < parts.size()) {
    std::vector<absl::string_view> rest(parts.begin() + static_cast<long>(i), parts.end());
    spec.os = absl::StrJoin(rest, "-");
  }
  spec.derived_from = absl::StrCat("CUDA ", spec.cuda->ToString(), " from the nvidia/cuda tag \"",
                                   tag, "\"");
  return spec;
}

WorkloadSpec ParsePytorchTag(WorkloadSpec spec, absl::string_view tag) {
  std::vector<absl::string_view> parts = absl::StrSplit(tag, '-');
  std::optional<Version> torch = ParseVersionOpt(parts[0], 2, 3);
  std::optional<Version> cuda;
  if (parts.size() >= 2 && absl::StartsWith(parts[1], "cuda")) {
    cuda = ParseVersionOpt(parts[1].substr(4), 2, 3);
  }
  if (!torch || !cuda) {
    return Unknown(std::move(spec),
                   absl::StrCat("the tag \"", tag,
                                "\" does not follow pytorch/pytorch's "
                                "<torch>-cuda<X.Y>-cudnn<N>-<runtime|devel> pattern"),
                   {InspectHint(spec.input)});
  }
  spec.framework = "pytorch";
  spec.framework_version = *torch;
  spec.cuda = *cuda;
  spec.wheel = absl::StrCat("cu", cuda->major(), cuda->minor());
  if (parts.size() >= 3 && absl::StartsWith(parts[2], "cudnn")) {
    spec.cudnn = std::string(parts[2].substr(5));
  }
  if (parts.size() >= 4) spec.flavor = std::string(parts[3]);
  spec.derived_from = absl::StrCat("CUDA ", cuda->ToString(), " and PyTorch ", torch->ToString(),
                                   " from the pytorch/pytorch tag \"", tag, "\"");
  return spec;
}

WorkloadSpec ParseNgcMonthTag(const CompatData& data, WorkloadSpec spec, absl::string_view tag,
                              bool triton) {
  absl::string_view month = tag.substr(0, std::min<size_t>(5, tag.size()));
  absl::string_view variant = tag.size() > 6 ? tag.substr(6) : absl::string_view();
  std::string product = triton ? "Triton Inference Server" : "PyTorch";
  std::string notes_url =
      triton ? absl::StrCat("https://docs.nvidia.com/deeplearning/triton-inference-server/"
                            "release-notes/rel-",
                            absl::StrReplaceAll(month, {{".", "-"}}), ".html")
             : absl::StrCat("https://docs.nvidia.com/deeplearning/frameworks/pytorch-release-notes/"
                            "rel-",
                            absl::StrReplaceAll(month, {{".", "-"}}), ".html");
  if (!IsMonth(month) || tag.size() < 7 || tag[5] != '-') {
    return Unknown(std::move(spec),
                   absl::StrCat("the tag \"", tag, "\" does not follow NGC's YY.MM-py3 pattern"),
                   {InspectHint(spec.input)});
  }
  spec.framework = triton ? "tritonserver" : "pytorch";
  spec.flavor = std::string(variant);
  std::string lookup_variant(variant);
  bool via_vllm_table = false;
  if (!triton) {
    if (variant != "py3" && variant != "py3-igpu") {
      return Unknown(std::move(spec),
                     absl::StrCat("the NGC PyTorch tag \"", tag,
                                  "\" has an unknown variant (expected YY.MM-py3)"),
                     {InspectHint(spec.input)});
    }
    lookup_variant = "py3";
  } else if (variant == "py3") {
    lookup_variant = "vllm-python-py3";
    via_vllm_table = true;
  } else if (variant != "vllm-python-py3" && variant != "trtllm-python-py3") {
    return Unknown(std::move(spec),
                   absl::StrCat("the Triton tag variant \"", variant,
                                "\" is not in the data set (known: py3, vllm-python-py3, "
                                "trtllm-python-py3)"),
                   {InspectHint(spec.input)});
  }
  for (const ImageRelease* r : data.ReleasesOf(spec.family)) {
    if (!r->variant.empty() && r->variant != variant) continue;
    if (std::find(r->tags.begin(), r->tags.end(), month) == r->tags.end()) continue;
    return FromRelease(std::move(spec), *r, tag);
  }
  const std::vector<MonthCuda>& table = triton ? data.tritonserver : data.ngc_pytorch;
  for (const MonthCuda& m : table) {
    if (m.variant != lookup_variant) continue;
    if (std::find(m.tags.begin(), m.tags.end(), month) == m.tags.end()) continue;
    spec.cuda = m.cuda;
    spec.source = m.provenance.source;
    spec.confidence = m.provenance.confidence;
    spec.derived_from = absl::StrCat("CUDA ", m.cuda.ToString(), " for NGC ", product, " ", month,
                                     " (", lookup_variant, ") from the data set");
    if (via_vllm_table) {
      spec.confidence = Confidence::kDerived;
      absl::StrAppend(&spec.derived_from,
                      "; the plain -py3 image is assumed to share the CUDA of the "
                      "-vllm-python-py3 image of the same month (derived)");
    }
    return spec;
  }
  // The plain -py3 Triton image of a month may be in images.releases (its own release notes).
  std::string why =
      absl::StrCat(NotInDataSet(data, spec.family, month), "; the tag does not carry the CUDA version");
  std::vector<std::string> needed = {absl::StrCat(
      "the CUDA version of the ", month, " release: see ", notes_url, " or ", InspectHint(spec.input))};
  return Unknown(std::move(spec), std::move(why), std::move(needed));
}

WorkloadSpec ParseVllmTag(const CompatData& data, WorkloadSpec spec, absl::string_view tag) {
  spec.framework = "vllm";
  absl::string_view v = tag;
  absl::ConsumePrefix(&v, "v");
  spec.framework_version = ParseVersionOpt(v, 2, 4);
  for (const VllmImage& img : data.vllm_images) {
    if (img.tag == tag) {
      spec.cuda = img.cuda;
      spec.source = img.provenance.source;
      spec.confidence = img.provenance.confidence;
      spec.derived_from = absl::StrCat("CUDA ", img.cuda.ToString(), " for vllm/vllm-openai:", tag,
                                       " from the data set");
      return spec;
    }
  }
  for (const ImageRelease* r : data.ReleasesOf(spec.family)) {
    for (const std::string& t : r->tags) {
      if (t == tag) return FromRelease(std::move(spec), *r, tag);
    }
  }
  std::string why = absl::StrCat(NotInDataSet(data, spec.family, tag),
                                 "; the tag does not carry the CUDA version");
  std::vector<std::string> needed = {InspectHint(spec.input)};
  return Unknown(std::move(spec), std::move(why), std::move(needed));
}

// images.releases lookup. `ngc`: the tag is YY.MM[-variant] and the month is looked up (with the
// release's variant when it names one); otherwise the whole tag, a leading "v" optional.
WorkloadSpec ParseTableTag(const CompatData& data, WorkloadSpec spec, absl::string_view tag,
                           bool ngc) {
  spec.framework = FrameworkOf(spec.family);
  absl::string_view key = tag;
  absl::string_view variant;
  if (ngc) {
    absl::string_view month = tag.substr(0, std::min<size_t>(5, tag.size()));
    if (!IsMonth(month) || (tag.size() > 5 && tag[5] != '-')) {
      return Unknown(std::move(spec),
                     absl::StrCat("the tag \"", tag,
                                  "\" does not follow NGC's YY.MM[-variant] pattern (e.g. 25.08-py3)"),
                     {InspectHint(spec.input)});
    }
    key = month;
    if (tag.size() > 6) variant = tag.substr(6);
    spec.flavor = std::string(variant);
  } else {
    absl::string_view v = tag;
    absl::ConsumePrefix(&v, "v");
    spec.framework_version = ParseVersionOpt(v.substr(0, v.find('-')), 2, 4);
  }
  auto same = [&](absl::string_view a, absl::string_view b) {
    if (ngc) return a == b;
    absl::ConsumePrefix(&a, "v");
    absl::ConsumePrefix(&b, "v");
    return a == b;
  };
  for (const ImageRelease* r : data.ReleasesOf(spec.family)) {
    if (ngc && !r->variant.empty() && r->variant != variant) continue;
    for (const std::string& t : r->tags) {
      if (same(t, key)) return FromRelease(std::move(spec), *r, tag);
    }
  }
  std::string why = absl::StrCat(NotInDataSet(data, spec.family, ngc ? key : tag),
                                 "; the tag does not carry the CUDA version");
  std::vector<std::string> needed = {InspectHint(spec.input)};
  return Unknown(std::move(spec), std::move(why), std::move(needed));
}

// lmsysorg/sglang: vX.Y.Z[.postN]-cuXYZ[-...] names the CUDA build; other tags via the table.
WorkloadSpec ParseSglangTag(const CompatData& data, WorkloadSpec spec, absl::string_view tag) {
  std::vector<absl::string_view> parts = absl::StrSplit(tag, '-');
  for (size_t i = 1; i < parts.size(); ++i) {
    absl::string_view p = parts[i];
    if (!absl::StartsWith(p, "cu") || p.size() < 4 || !IsDigit(p[2])) continue;
    auto cuda = CudaFromWheelTag(p);
    if (!cuda.ok()) continue;
    absl::string_view v = parts[0];
    absl::ConsumePrefix(&v, "v");
    spec.framework = "sglang";
    spec.framework_version = ParseVersionOpt(v, 2, 4);
    spec.cuda = *cuda;
    spec.wheel = std::string(p);
    spec.flavor = std::string(tag.substr(parts[0].size() + 1));
    spec.derived_from = absl::StrCat("CUDA ", cuda->ToString(), " from the tag suffix -", p,
                                     " of lmsysorg/sglang:", tag);
    return spec;
  }
  return ParseTableTag(data, std::move(spec), tag, false);
}

const TensorflowBuild* FindTensorflow(const CompatData& data, const Version& tf) {
  for (const TensorflowBuild& b : data.tensorflow) {
    for (const Version& v : b.tf) {
      if (v.major() == tf.major() && v.minor() == tf.minor()) return &b;
    }
  }
  return nullptr;
}

WorkloadSpec FromTensorflow(const CompatData& data, WorkloadSpec spec, const Version& tf) {
  spec.framework = "tensorflow";
  spec.framework_version = tf;
  const TensorflowBuild* b = FindTensorflow(data, tf);
  if (!b) {
    return Unknown(std::move(spec),
                   absl::StrCat("TensorFlow ", tf.ToString(),
                                " is not in the data set's tested build configurations"),
                   {"the CUDA version of that TensorFlow build: see "
                    "https://www.tensorflow.org/install/source#gpu, then pass --cuda X.Y"});
  }
  spec.cuda = b->cuda;
  spec.cudnn = b->cudnn;
  spec.source = b->provenance.source;
  spec.confidence = b->provenance.confidence;
  spec.derived_from = absl::StrCat("CUDA ", b->cuda.ToString(), " for TensorFlow ",
                                   tf.Truncate(2).ToString(),
                                   " (tested build configuration, from the data set)");
  return spec;
}

WorkloadSpec ParseTensorflowTag(const CompatData& data, WorkloadSpec spec, absl::string_view tag) {
  std::vector<absl::string_view> parts = absl::StrSplit(tag, absl::MaxSplits('-', 1));
  std::optional<Version> tf = ParseVersionOpt(parts[0], 2, 3);
  bool gpu = parts.size() == 2 && absl::StartsWith(parts[1], "gpu");
  if (!tf || !gpu) {
    return Unknown(std::move(spec),
                   absl::StrCat("the tag \"", tag,
                                "\" is not a <version>-gpu TensorFlow tag (other tags are CPU-only "
                                "or move over time)"),
                   {"a pinned GPU tag such as 2.15.0-gpu, or --cuda X.Y"});
  }
  spec.flavor = std::string(parts[1]);
  return FromTensorflow(data, std::move(spec), *tf);
}

}  // namespace

StatusOr<ImageRef> ParseImageRef(absl::string_view text) {
  if (text.empty()) return BadRef(text, "it is empty");
  if (text.size() > kMaxReference) return BadRef(text, "it is too long");
  for (char c : text) {
    if (c <= ' ' || c == 0x7f || static_cast<unsigned char>(c) >= 0x80) {
      return BadRef(text, "it contains whitespace or a non-ASCII character");
    }
  }
  ImageRef ref;
  absl::string_view rest = text;
  if (size_t at = rest.find('@'); at != absl::string_view::npos) {
    absl::string_view digest = rest.substr(at + 1);
    rest = rest.substr(0, at);
    size_t colon = digest.find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return BadRef(text, "the digest must be ALGORITHM:HEX, e.g. sha256:<64 hex digits>");
    }
    absl::string_view algo = digest.substr(0, colon);
    absl::string_view hex = digest.substr(colon + 1);
    if (algo == "sha256" && hex.size() != 64) {
      return BadRef(text, "a sha256 digest has 64 hex digits");
    }
    if (hex.size() < 32 || !std::all_of(hex.begin(), hex.end(), IsHex) ||
        !std::all_of(algo.begin(), algo.end(), [](char c) { return IsLowerAlnum(c) || c == '+' || c == '.' || c == '_' || c == '-'; })) {
      return BadRef(text, "the digest must be ALGORITHM:HEX in lower case");
    }
    ref.digest = std::string(digest);
  }
  size_t slash = rest.rfind('/');
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    ref.tag = std::string(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (!ValidTag(ref.tag)) {
      return BadRef(text, absl::StrCat("the tag \"", ref.tag,
                                       "\" may hold only letters, digits, '_', '.' and '-' "
                                       "(at most 128, not starting with '.' or '-')"));
    }
  }
  if (rest.empty()) return BadRef(text, "the repository name is missing");
  std::vector<absl::string_view> comps = absl::StrSplit(rest, '/');
  absl::string_view first = comps[0];
  if (comps.size() > 1 && (absl::StrContains(first, ".") || absl::StrContains(first, ":") ||
                           first == "localhost")) {
    if (!ValidDomain(first)) return BadRef(text, absl::StrCat("bad registry \"", first, "\""));
    ref.registry = absl::AsciiStrToLower(first);
    comps.erase(comps.begin());
  } else {
    ref.registry = "docker.io";
  }
  if (ref.registry == "index.docker.io" || ref.registry == "registry-1.docker.io") {
    ref.registry = "docker.io";
  }
  for (absl::string_view c : comps) {
    if (!ValidPathComponent(c)) {
      return BadRef(text, absl::StrCat("the repository component \"", c,
                                       "\" must be lower-case letters and digits, separated by "
                                       "'.', '_' or '-'"));
    }
  }
  if (ref.registry == "docker.io" && comps.size() == 1) comps.insert(comps.begin(), "library");
  ref.repository = absl::StrJoin(comps, "/");
  if (ref.registry.size() + ref.repository.size() + 1 > 255) {
    return BadRef(text, "the name is longer than 255 characters");
  }
  if (ref.tag.empty() && ref.digest.empty()) {
    ref.tag = "latest";
    ref.tag_defaulted = true;
  }
  return ref;
}

StatusOr<WorkloadSpec> WorkloadFromImage(const CompatData& data, absl::string_view text) {
  GPUNODE_ASSIGN_OR_RETURN(ImageRef ref, ParseImageRef(text));
  WorkloadSpec spec;
  spec.input = std::string(text);
  const ImageFamily* family = nullptr;
  for (const ImageFamily& f : data.image_families) {
    for (const std::string& r : f.repositories) {
      if (r == ref.Name()) family = &f;
    }
  }
  if (!family) {
    std::vector<std::string> known;
    for (const ImageFamily& f : data.image_families) known.push_back(f.family);
    return Unknown(std::move(spec),
                   absl::StrCat("gpunode has no tag rules for ", ref.Name()),
                   {InspectHint(text),
                    absl::StrCat("or an image of a family gpunode can read: ",
                                 absl::StrJoin(known, ", "))});
  }
  spec.family = family->family;
  spec.ships_cuda_compat = family->ships_cuda_compat;
  spec.source = family->provenance.source;
  spec.confidence = family->provenance.confidence;
  if (ref.tag.empty()) {
    return Unknown(std::move(spec),
                   absl::StrCat("a digest alone (", ref.digest.substr(0, 19),
                                "...) does not say which CUDA the image was built with; pass the "
                                "tag too (", ref.Name(), ":TAG@sha256:...)"),
                   {absl::StrCat("the tag (", ref.Name(), ":TAG@", ref.digest, ")"),
                    InspectHint(text)});
  }
  if (ref.tag == "latest") {
    return Unknown(std::move(spec),
                   absl::StrCat("the tag \"latest\"", ref.tag_defaulted ? " (implied)" : "",
                                " moves over time and does not say which CUDA it carries"),
                   {"a pinned tag", InspectHint(text)});
  }
  const std::string& p = family->parser;
  if (p == "cuda") return ParseCudaTag(std::move(spec), ref.tag);
  if (p == "pytorch") return ParsePytorchTag(std::move(spec), ref.tag);
  if (p == "ngc-month") return ParseNgcMonthTag(data, std::move(spec), ref.tag, false);
  if (p == "triton-month") return ParseNgcMonthTag(data, std::move(spec), ref.tag, true);
  if (p == "vllm") return ParseVllmTag(data, std::move(spec), ref.tag);
  if (p == "tensorflow") return ParseTensorflowTag(data, std::move(spec), ref.tag);
  if (p == "ngc-table") return ParseTableTag(data, std::move(spec), ref.tag, true);
  if (p == "tag-table") return ParseTableTag(data, std::move(spec), ref.tag, false);
  if (p == "sglang") return ParseSglangTag(data, std::move(spec), ref.tag);
  return Unknown(std::move(spec), absl::StrCat("no tag parser named ", p), {InspectHint(text)});
}

StatusOr<WorkloadSpec> WorkloadFromCuda(absl::string_view text) {
  GPUNODE_ASSIGN_OR_RETURN(Version v, Version::Parse(text, "--cuda"));
  if (v.parts().size() < 2 || v.parts().size() > 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cuda \"", text, "\" is not a CUDA version: expected X.Y or X.Y.Z, e.g. 12.4"));
  }
  WorkloadSpec spec;
  spec.input = absl::StrCat("--cuda ", text);
  spec.family = "--cuda";
  spec.cuda = v.Truncate(3);
  spec.derived_from = absl::StrCat("CUDA ", spec.cuda->ToString(), " given with --cuda");
  return spec;
}

StatusOr<Version> CudaFromWheelTag(absl::string_view wheel) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", wheel, "\" is not a CUDA wheel variant (expected cuXY or cuXYZ, e.g. cu124)"));
  };
  if (!absl::StartsWith(wheel, "cu")) return bad();
  absl::string_view d = wheel.substr(2);
  if (d.size() < 2 || d.size() > 3 || !std::all_of(d.begin(), d.end(), IsDigit)) return bad();
  uint32_t major = d.size() == 3 ? static_cast<uint32_t>((d[0] - '0') * 10 + (d[1] - '0'))
                                 : static_cast<uint32_t>(d[0] - '0');
  uint32_t minor = static_cast<uint32_t>(d.back() - '0');
  if (major == 0) return bad();
  return Version::Of({major, minor});
}

namespace {

// A pip requirement "name[extras]==version": name and extras lower-cased; version may be empty.
struct PipRequirement {
  std::string name;
  std::string extras;
  absl::string_view version;  // into the text parsed
};

Status NotPipRequirement(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("\"", Printable(text.substr(0, 200)), "\" is not a pip requirement: ", why,
                   " (expected e.g. torch==2.5.1+cu124)"));
}

StatusOr<PipRequirement> ParsePipRequirement(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  auto bad = [&](absl::string_view why) { return NotPipRequirement(text, why); };
  if (s.empty()) return bad("it is empty");
  if (s.size() > 200) return bad("it is too long");
  for (char c : s) {
    if ((c < ' ' && c != '\t') || c == 0x7f || static_cast<unsigned char>(c) >= 0x80) {
      return bad("it contains a control or non-ASCII character");
    }
  }
  // name: letters, digits, '-', '_', '.', optional [extras]. A bare version ("2.5.1+cu124",
  // from --torch) starts with a digit and means torch.
  PipRequirement req;
  if (IsDigit(s[0])) {
    req.name = "torch";
    req.version = s;
    return req;
  }
  size_t i = 0;
  while (i < s.size() && (absl::ascii_isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' ||
                          s[i] == '_' || s[i] == '.')) {
    ++i;
  }
  req.name = absl::AsciiStrToLower(s.substr(0, i));
  if (i < s.size() && s[i] == '[') {
    size_t close = s.find(']', i);
    if (close == absl::string_view::npos) return bad("an extra is not closed with ']'");
    req.extras = absl::AsciiStrToLower(s.substr(i + 1, close - i - 1));
    i = close + 1;
  }
  absl::string_view rest = absl::StripAsciiWhitespace(s.substr(i));
  if (!absl::ConsumePrefix(&rest, "==")) {
    if (!rest.empty() && s[i] != ' ' && s[i] != '\t') return bad("expected == after the name");
  }
  req.version = absl::StripAsciiWhitespace(rest);
  if (req.name.empty()) return bad("the package name is missing");
  return req;
}

// torch==X.Y.Z+cuXYZ: the CUDA of the wheel variant, or of the variant pip installs by default.
StatusOr<WorkloadSpec> PipTorch(const CompatData& data, WorkloadSpec spec, absl::string_view rest,
                                absl::string_view text) {
  spec.family = "pip torch";
  spec.framework = "pytorch";
  if (rest.empty()) return NotPipRequirement(text, "torch needs a version, e.g. torch==2.5.1+cu124");
  absl::string_view ver = rest;
  absl::string_view local;
  if (size_t plus = rest.find('+'); plus != absl::string_view::npos) {
    ver = rest.substr(0, plus);
    local = rest.substr(plus + 1);
  }
  GPUNODE_ASSIGN_OR_RETURN(const Version tv, Version::Parse(ver, "torch version"));
  spec.framework_version = tv;
  const TorchRelease* release = nullptr;
  for (const TorchRelease& r : data.torch_releases) {
    if (r.torch.major() == tv.major() && r.torch.minor() == tv.minor()) release = &r;
  }
  if (local.empty()) {
    if (release && !release->pypi_default.empty()) {
      local = release->pypi_default;
      spec.source = release->provenance.source;
    } else {
      return Unknown(std::move(spec),
                     absl::StrCat("torch ", tv.ToString(),
                                  " without +cuXYZ: which CUDA pip installs is not in the data set"),
                     {"the wheel variant, e.g. torch==2.5.1+cu124 (the index "
                      "https://download.pytorch.org/whl/cuXYZ you install from)"});
    }
  }
  if (local == "cpu" || absl::StartsWith(local, "rocm")) {
    return Unknown(std::move(spec), absl::StrCat("torch+", local, " is not a CUDA build"),
                   {"a CUDA wheel variant, e.g. +cu124"});
  }
  GPUNODE_ASSIGN_OR_RETURN(spec.cuda, CudaFromWheelTag(local));
  spec.wheel = std::string(local);
  spec.derived_from = absl::StrCat("CUDA ", spec.cuda->ToString(), " from the torch wheel variant +", local);
  return spec;
}

// jax[cudaNN]==X.Y.Z: the CUDA the data set gives that extra.
StatusOr<WorkloadSpec> PipJax(const CompatData& data, WorkloadSpec spec, absl::string_view rest,
                              const std::string& extras) {
  spec.family = "pip jax";
  spec.framework = "jax";
  if (!rest.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(spec.framework_version, Version::Parse(rest, "jax version"));
  }
  for (const JaxBuild& j : data.jax) {
    if (j.extra == extras) {
      spec.cuda = j.cuda;
      spec.flavor = extras;
      spec.source = j.provenance.source;
      spec.confidence = j.provenance.confidence;
      spec.derived_from = absl::StrCat("CUDA ", j.cuda.ToString(), " for jax[", extras,
                                       "] (built with it, from the data set)");
      return spec;
    }
  }
  return Unknown(std::move(spec), absl::StrCat("jax[", extras, "] is not in the data set"),
                 {"jax[cuda12] or jax[cuda13], or --cuda with the local toolkit's version"});
}

}  // namespace

StatusOr<WorkloadSpec> WorkloadFromPip(const CompatData& data, absl::string_view text) {
  GPUNODE_ASSIGN_OR_RETURN(PipRequirement req, ParsePipRequirement(text));
  WorkloadSpec spec;
  spec.input = std::string(text);
  if (req.name == "torch" || req.name == "pytorch") return PipTorch(data, std::move(spec), req.version, text);
  if (req.name == "tensorflow" || req.name == "tensorflow-gpu") {
    spec.family = "pip tensorflow";
    GPUNODE_ASSIGN_OR_RETURN(const Version tf, Version::Parse(req.version, "tensorflow version"));
    return FromTensorflow(data, std::move(spec), tf);
  }
  if (req.name == "jax") return PipJax(data, std::move(spec), req.version, req.extras);
  spec.family = absl::StrCat("pip ", req.name);
  return Unknown(std::move(spec), absl::StrCat("gpunode has no rules for the pip package ", req.name),
                 {"the CUDA version the package was built with, passed as --cuda X.Y"});
}

}  // namespace gpunode::compat
