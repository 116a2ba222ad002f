#include "src/compat/dataset.h"

#include "src/base/yaml.h"
#include "src/base/yaml_reader.h"
#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "yaml-cpp/yaml.h"

namespace gpunode::compat {

absl::string_view ConfidenceName(Confidence c) {
  switch (c) {
    case Confidence::kOfficial:
      return "official";
    case Confidence::kDerived:
      return "derived";
    case Confidence::kThirdParty:
      return "third_party";
    case Confidence::kUnconfirmed:
      return "unconfirmed";
  }
  return "unconfirmed";
}

std::vector<std::string> CompatData::SourceIds(absl::string_view source_field) {
  std::vector<std::string> ids;
  for (absl::string_view part : absl::StrSplit(source_field, ';')) {
    part = absl::StripAsciiWhitespace(part);
    size_t dash = part.find(" - ");
    if (dash != absl::string_view::npos) part = part.substr(0, dash);
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    std::string id(part);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

const DriverBranch* CompatData::FindBranch(int branch) const {
  for (const DriverBranch& b : branches) {
    if (b.branch == branch) return &b;
  }
  return nullptr;
}

const MinorCompat* CompatData::FindMinorCompat(int cuda_major) const {
  for (const MinorCompat& m : minor_compat) {
    if (m.cuda_major == cuda_major) return &m;
  }
  return nullptr;
}

const Architecture* CompatData::FindArchitecture(const Version& cc) const {
  for (const Architecture& a : architectures) {
    for (const Version& v : a.cc) {
      if (v == cc) return &a;
    }
  }
  return nullptr;
}

std::vector<const Toolkit*> CompatData::ToolkitsOfMinor(const Version& cuda) const {
  std::vector<const Toolkit*> rows;
  for (const Toolkit& t : toolkits) {
    if (t.cuda.major() == cuda.major() && t.cuda.minor() == cuda.minor()) rows.push_back(&t);
  }
  return rows;
}

const FcPackage* CompatData::FindFcPackage(const Version& cuda) const {
  for (const FcPackage& p : forward_compat.packages) {
    if (p.cuda.major() == cuda.major() && p.cuda.minor() == cuda.minor()) return &p;
  }
  return nullptr;
}

const ImageFamily* CompatData::FindFamily(absl::string_view family) const {
  for (const ImageFamily& f : image_families) {
    if (f.family == family) return &f;
  }
  return nullptr;
}

std::vector<const ImageRelease*> CompatData::ReleasesOf(absl::string_view family) const {
  std::vector<const ImageRelease*> out;
  for (const ImageRelease& r : image_releases) {
    if (r.family == family) out.push_back(&r);
  }
  return out;
}

int CompatData::FcColumn(int branch) const {
  for (size_t i = 0; i < forward_compat.columns.size(); ++i) {
    if (forward_compat.columns[i] == branch) return static_cast<int>(i);
  }
  return -1;
}

namespace {

// Reads one YAML mapping strictly: typed getters, and Finish() rejects keys nobody asked for
// (src/base/yaml_reader.h words every error: file, line, key path, what was expected).
class MapReader {
 public:
  explicit MapReader(YamlValue value) : v_(std::move(value)) {}

  Status CheckMap() const { return v_.ExpectMap(); }

  const YamlValue& value() const { return v_; }

  bool Has(absl::string_view key) { return Node(key).IsSet(); }

  YamlValue Node(absl::string_view key) {
    if (std::find(asked_.begin(), asked_.end(), key) == asked_.end()) asked_.emplace_back(key);
    return v_.Child(key);
  }

  StatusOr<std::string> String(absl::string_view key) {
    YamlValue n = Node(key);
    if (!n.IsSet() || !n.IsScalar()) return n.Expected("a string");
    return n.node().Scalar();
  }

  StatusOr<std::string> OptString(absl::string_view key) {
    if (!Has(key)) return std::string();
    return String(key);
  }

  StatusOr<Version> Ver(absl::string_view key) {
    GPUNODE_ASSIGN_OR_RETURN(std::string text, String(key));
    auto v = Version::Parse(text, "value");
    if (!v.ok()) return Node(key).Error(v.status().message());
    return *v;
  }

  StatusOr<std::optional<Version>> OptVer(absl::string_view key) {
    if (!Has(key)) return std::optional<Version>();
    GPUNODE_ASSIGN_OR_RETURN(Version v, Ver(key));
    return std::optional<Version>(v);
  }

  StatusOr<int> Int(absl::string_view key) {
    GPUNODE_ASSIGN_OR_RETURN(std::string text, String(key));
    int value = 0;
    if (!absl::SimpleAtoi(text, &value) || value < 0) return Node(key).Expected("a whole number");
    return value;
  }

  StatusOr<std::optional<int>> OptInt(absl::string_view key) {
    if (!Has(key)) return std::optional<int>();
    GPUNODE_ASSIGN_OR_RETURN(int v, Int(key));
    return std::optional<int>(v);
  }

  StatusOr<bool> Bool(absl::string_view key) {
    YamlValue n = Node(key);
    if (!n.IsSet()) return n.Expected("true or false");
    return n.Bool(YamlBool::kStrict);
  }

  StatusOr<std::vector<std::string>> Strings(absl::string_view key, bool required = true) {
    YamlValue n = Node(key);
    if (!n.IsSet()) {
      if (required) return n.Expected("a list");
      return std::vector<std::string>();
    }
    if (!n.IsList()) return n.Expected("a list");
    return n.Strings();
  }

  StatusOr<std::vector<Version>> Versions(absl::string_view key, bool required = true) {
    GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> texts, Strings(key, required));
    std::vector<Version> out;
    for (size_t i = 0; i < texts.size(); ++i) {
      auto v = Version::Parse(texts[i], "value");
      if (!v.ok()) return Node(key).Item(i).Error(v.status().message());
      out.push_back(*v);
    }
    return out;
  }

  // source + confidence (+ optional note), with the source ids checked against `sources`.
  StatusOr<Provenance> Prov(const std::map<std::string, std::string>& sources,
                            absl::string_view source_key = "source") {
    Provenance p;
    GPUNODE_ASSIGN_OR_RETURN(p.source, String(source_key));
    for (const std::string& id : CompatData::SourceIds(p.source)) {
      if (!sources.count(id)) {
        return Node(source_key).Error(absl::StrCat("unknown source id \"", id, "\" (not in the sources: map)"));
      }
    }
    GPUNODE_ASSIGN_OR_RETURN(std::string conf, String("confidence"));
    if (conf == "official") {
      p.confidence = Confidence::kOfficial;
    } else if (conf == "derived") {
      p.confidence = Confidence::kDerived;
    } else if (conf == "third_party") {
      p.confidence = Confidence::kThirdParty;
    } else if (conf == "unconfirmed") {
      p.confidence = Confidence::kUnconfirmed;
    } else {
      return Node("confidence").Expected("one of official, derived, third_party, unconfirmed");
    }
    GPUNODE_ASSIGN_OR_RETURN(p.note, OptString("note"));
    return p;
  }

  // The keys asked for are the known ones.
  Status Finish() const { return v_.ExpectMap(asked_); }

 private:
  YamlValue v_;
  std::vector<std::string> asked_;
};

// Calls `fn(MapReader&)` for each mapping of the list at `key` of `parent`.
template <typename Fn>
Status ForEachItem(MapReader& parent, absl::string_view key, Fn fn) {
  YamlValue list = parent.Node(key);
  if (!list.IsSet() || !list.IsList()) return list.Expected("a list");
  return list.ForEachItem([&](const YamlValue& v) -> Status {
    MapReader item(v);
    GPUNODE_RETURN_IF_ERROR(item.CheckMap());
    GPUNODE_RETURN_IF_ERROR(fn(item));
    return item.Finish();
  });
}

StatusOr<uint16_t> ParsePciId(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  int base = 10;
  if (absl::ConsumePrefix(&t, "0x") || absl::ConsumePrefix(&t, "0X")) base = 16;
  if (t.empty() || t.size() > 6) return absl::InvalidArgumentError("not a PCI device id");
  uint32_t value = 0;
  for (char c : t) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (base == 16 && c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (base == 16 && c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return absl::InvalidArgumentError("not a PCI device id");
    }
    value = value * base + d;
  }
  if (value > 0xffff) return absl::InvalidArgumentError("not a PCI device id");
  return static_cast<uint16_t>(value);
}

// apiVersion, kind, metadata, updated, sources.
Status ParseHeader(MapReader& top, CompatData& d) {
  GPUNODE_RETURN_IF_ERROR(top.CheckMap());
  GPUNODE_ASSIGN_OR_RETURN(std::string api, top.String("apiVersion"));
  if (api != "gpunode/v1") {
    return top.Node("apiVersion").Expected("gpunode/v1");
  }
  GPUNODE_ASSIGN_OR_RETURN(std::string kind, top.String("kind"));
  if (kind != "CompatData") {
    return top.Node("kind").Expected("CompatData");
  }
  top.Node("metadata");  // free-form
  GPUNODE_ASSIGN_OR_RETURN(d.updated, top.OptString("updated"));

  const YamlValue sources = top.Node("sources");
  if (!sources.IsMap()) return sources.Expected("a map of id: text");
  for (auto it = sources.node().begin(); it != sources.node().end(); ++it) {
    const std::string id = it->first.Scalar();  // as before: a key that is not a scalar reads as ""
    const YamlValue text(it->second, sources.source(), sources.JoinPath(id), sources.line());
    GPUNODE_ASSIGN_OR_RETURN(d.sources[id], text.String());
  }
  return absl::OkStatus();
}

// toolkits, minor_version_compat, driver_branches.
Status ParseCudaTables(MapReader& top, CompatData& d) {
  GPUNODE_RETURN_IF_ERROR(ForEachItem(top, "toolkits", [&](MapReader& r) -> Status {
    Toolkit t;
    GPUNODE_ASSIGN_OR_RETURN(t.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(t.release, r.String("release"));
    GPUNODE_ASSIGN_OR_RETURN(t.driver, r.OptVer("driver"));
    GPUNODE_ASSIGN_OR_RETURN(t.paired_branch, r.OptInt("paired_branch"));
    GPUNODE_ASSIGN_OR_RETURN(t.provenance, r.Prov(d.sources));
    d.toolkits.push_back(std::move(t));
    return absl::OkStatus();
  }));

  GPUNODE_RETURN_IF_ERROR(ForEachItem(top, "minor_version_compat", [&](MapReader& r) -> Status {
    MinorCompat m;
    GPUNODE_ASSIGN_OR_RETURN(m.cuda_major, r.Int("cuda_major"));
    GPUNODE_ASSIGN_OR_RETURN(m.floor, r.OptVer("floor"));
    GPUNODE_ASSIGN_OR_RETURN(m.min_branch, r.OptInt("min_branch"));
    GPUNODE_ASSIGN_OR_RETURN(m.provenance, r.Prov(d.sources));
    d.minor_compat.push_back(std::move(m));
    return absl::OkStatus();
  }));

  GPUNODE_RETURN_IF_ERROR(ForEachItem(top, "driver_branches", [&](MapReader& r) -> Status {
    DriverBranch b;
    GPUNODE_ASSIGN_OR_RETURN(b.branch, r.Int("branch"));
    GPUNODE_ASSIGN_OR_RETURN(b.max_cuda, r.OptVer("max_cuda"));
    GPUNODE_ASSIGN_OR_RETURN(b.max_cuda_major, r.OptInt("max_cuda_major"));
    GPUNODE_ASSIGN_OR_RETURN(b.type, r.OptString("type"));
    GPUNODE_ASSIGN_OR_RETURN(b.eol, r.OptString("eol"));
    GPUNODE_ASSIGN_OR_RETURN(b.provenance, r.Prov(d.sources));
    d.branches.push_back(std::move(b));
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

Status ParseForwardCompat(MapReader& top, CompatData& d) {
  MapReader fc(top.Node("forward_compat"));
  GPUNODE_RETURN_IF_ERROR(fc.CheckMap());
  GPUNODE_ASSIGN_OR_RETURN(d.forward_compat.eligible_segments, fc.Strings("eligible_segments"));
  GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> cols, fc.Strings("columns"));
  for (size_t i = 0; i < cols.size(); ++i) {
    int v = 0;
    if (!absl::SimpleAtoi(cols[i], &v)) {
      return fc.Node("columns").Item(i).Expected("a driver branch number");
    }
    d.forward_compat.columns.push_back(v);
  }
  GPUNODE_RETURN_IF_ERROR(ForEachItem(fc, "packages", [&](MapReader& r) -> Status {
    FcPackage p;
    GPUNODE_ASSIGN_OR_RETURN(p.package, r.String("package"));
    GPUNODE_ASSIGN_OR_RETURN(p.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> cells, r.Strings("support"));
    if (cells.size() != d.forward_compat.columns.size()) {
      return r.Node("support").Error(absl::StrCat("has ", cells.size(), " cells but there are ",
                                  d.forward_compat.columns.size(), " columns"));
    }
    for (size_t i = 0; i < cells.size(); ++i) {
      if (cells[i] == "C") {
        p.support.push_back(FcCell::kSupported);
      } else if (cells[i] == "X") {
        p.support.push_back(FcCell::kUnsupported);
      } else if (cells[i] == "N/A") {
        p.support.push_back(FcCell::kPaired);
      } else {
        return r.Node("support").Item(i).Expected("C, X or N/A");
      }
    }
    d.forward_compat.packages.push_back(std::move(p));
    return absl::OkStatus();
  }));
  GPUNODE_ASSIGN_OR_RETURN(d.forward_compat.provenance, fc.Prov(d.sources));
  GPUNODE_RETURN_IF_ERROR(fc.Finish());
  return absl::OkStatus();
}

// architectures, gpus.
Status ParseHardware(MapReader& top, CompatData& d) {
  GPUNODE_RETURN_IF_ERROR(ForEachItem(top, "architectures", [&](MapReader& r) -> Status {
    Architecture a;
    GPUNODE_ASSIGN_OR_RETURN(a.name, r.String("name"));
    GPUNODE_ASSIGN_OR_RETURN(a.cc, r.Versions("cc"));
    GPUNODE_ASSIGN_OR_RETURN(a.first_cuda, r.Ver("first_cuda"));
    GPUNODE_ASSIGN_OR_RETURN(a.last_cuda_major, r.OptInt("last_cuda_major"));
    GPUNODE_ASSIGN_OR_RETURN(a.first_branch, r.OptInt("first_branch"));
    GPUNODE_ASSIGN_OR_RETURN(a.last_branch, r.OptInt("last_branch"));
    GPUNODE_ASSIGN_OR_RETURN(a.provenance, r.Prov(d.sources));
    d.architectures.push_back(std::move(a));
    return absl::OkStatus();
  }));

  GPUNODE_RETURN_IF_ERROR(ForEachItem(top, "gpus", [&](MapReader& r) -> Status {
    GpuModel g;
    GPUNODE_ASSIGN_OR_RETURN(g.name, r.String("name"));
    GPUNODE_ASSIGN_OR_RETURN(g.arch, r.String("arch"));
    GPUNODE_ASSIGN_OR_RETURN(g.cc, r.Ver("cc"));
    GPUNODE_ASSIGN_OR_RETURN(g.segment, r.String("segment"));
    static const std::set<std::string> kSegments = {"datacenter", "workstation", "consumer",
                                                    "embedded"};
    if (!kSegments.count(g.segment)) {
      return r.Node("segment").Expected("one of datacenter, workstation, consumer, embedded");
    }
    GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> ids, r.Strings("pci_ids", false));
    for (size_t i = 0; i < ids.size(); ++i) {
      auto id = ParsePciId(ids[i]);
      if (!id.ok()) {
        return r.Node("pci_ids").Item(i).Expected("a PCI device id such as 0x2335");
      }
      g.pci_ids.push_back(*id);
    }
    GPUNODE_ASSIGN_OR_RETURN(g.aliases, r.Strings("aliases", false));
    GPUNODE_ASSIGN_OR_RETURN(g.provenance, r.Prov(d.sources));
    d.gpus.push_back(std::move(g));
    return absl::OkStatus();
  }));
  return absl::OkStatus();
}

Status ParseFrameworks(MapReader& top, CompatData& d) {
  MapReader fw(top.Node("frameworks"));
  GPUNODE_RETURN_IF_ERROR(fw.CheckMap());
  MapReader pt(fw.Node("pytorch"));
  GPUNODE_RETURN_IF_ERROR(pt.CheckMap());
  GPUNODE_RETURN_IF_ERROR(ForEachItem(pt, "releases", [&](MapReader& r) -> Status {
    TorchRelease t;
    GPUNODE_ASSIGN_OR_RETURN(t.torch, r.Ver("torch"));
    GPUNODE_ASSIGN_OR_RETURN(t.wheels, r.Strings("wheels"));
    GPUNODE_ASSIGN_OR_RETURN(t.pypi_default, r.OptString("pypi_default"));
    GPUNODE_ASSIGN_OR_RETURN(t.provenance, r.Prov(d.sources));
    d.torch_releases.push_back(std::move(t));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(pt, "arch_lists", [&](MapReader& r) -> Status {
    TorchArchList a;
    GPUNODE_ASSIGN_OR_RETURN(a.torch, r.Versions("torch"));
    GPUNODE_ASSIGN_OR_RETURN(a.wheel, r.String("wheel"));
    GPUNODE_ASSIGN_OR_RETURN(std::vector<Version> range, r.Versions("sass_range", false));
    if (!range.empty()) {
      if (range.size() != 2) {
        return r.Node("sass_range").Expected("[first, last]");
      }
      a.sass_min = range[0];
      a.sass_max = range[1];
    }
    GPUNODE_ASSIGN_OR_RETURN(a.sass, r.Versions("sass", false));
    GPUNODE_ASSIGN_OR_RETURN(a.ptx, r.Versions("ptx", false));
    if (a.sass.empty() && !a.sass_min) {
      return r.Node("sass").Error("one of sass or sass_range is required");
    }
    GPUNODE_ASSIGN_OR_RETURN(a.provenance, r.Prov(d.sources));
    d.torch_arch_lists.push_back(std::move(a));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(pt, "gpu_floors", [&](MapReader& r) -> Status {
    TorchGpuFloor f;
    GPUNODE_ASSIGN_OR_RETURN(f.cc, r.Versions("cc"));
    GPUNODE_ASSIGN_OR_RETURN(f.min_torch, r.Ver("min_torch"));
    GPUNODE_ASSIGN_OR_RETURN(f.min_cuda, r.Ver("min_cuda"));
    GPUNODE_ASSIGN_OR_RETURN(f.provenance, r.Prov(d.sources));
    d.torch_gpu_floors.push_back(std::move(f));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(pt.Finish());
  GPUNODE_RETURN_IF_ERROR(ForEachItem(fw, "tensorflow", [&](MapReader& r) -> Status {
    TensorflowBuild t;
    GPUNODE_ASSIGN_OR_RETURN(t.tf, r.Versions("tf"));
    GPUNODE_ASSIGN_OR_RETURN(t.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(t.cudnn, r.OptString("cudnn"));
    GPUNODE_ASSIGN_OR_RETURN(t.provenance, r.Prov(d.sources));
    d.tensorflow.push_back(std::move(t));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(fw, "jax", [&](MapReader& r) -> Status {
    JaxBuild j;
    GPUNODE_ASSIGN_OR_RETURN(j.extra, r.String("extra"));
    GPUNODE_ASSIGN_OR_RETURN(j.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(j.min_cc, r.Ver("min_cc"));
    GPUNODE_ASSIGN_OR_RETURN(j.provenance, r.Prov(d.sources));
    d.jax.push_back(std::move(j));
    return absl::OkStatus();
  }));
  MapReader vl(fw.Node("vllm"));
  GPUNODE_RETURN_IF_ERROR(vl.CheckMap());
  GPUNODE_ASSIGN_OR_RETURN(d.vllm_min_cc, vl.OptVer("min_cc"));
  GPUNODE_ASSIGN_OR_RETURN(d.vllm_min_cc_source, vl.OptString("min_cc_source"));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(vl, "images", [&](MapReader& r) -> Status {
    VllmImage v;
    GPUNODE_ASSIGN_OR_RETURN(v.tag, r.String("tag"));
    GPUNODE_ASSIGN_OR_RETURN(v.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(v.provenance, r.Prov(d.sources));
    d.vllm_images.push_back(std::move(v));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(vl.Finish());
  GPUNODE_RETURN_IF_ERROR(fw.Finish());
  return absl::OkStatus();
}

Status ParseImages(MapReader& top, CompatData& d) {
  MapReader im(top.Node("images"));
  GPUNODE_RETURN_IF_ERROR(im.CheckMap());
  GPUNODE_RETURN_IF_ERROR(ForEachItem(im, "families", [&](MapReader& r) -> Status {
    ImageFamily f;
    GPUNODE_ASSIGN_OR_RETURN(f.family, r.String("family"));
    GPUNODE_ASSIGN_OR_RETURN(f.repositories, r.Strings("repositories"));
    GPUNODE_ASSIGN_OR_RETURN(f.parser, r.String("parser"));
    static const std::set<std::string> kParsers = {
        "cuda", "pytorch", "ngc-month", "triton-month", "vllm", "tensorflow",
        "ngc-table", "tag-table", "sglang"};
    if (!kParsers.count(f.parser)) {
      return r.Node("parser").Expected(absl::StrCat("a known tag parser (", absl::StrJoin(kParsers, ", "), ")"));
    }
    GPUNODE_ASSIGN_OR_RETURN(f.ships_cuda_compat, r.Bool("ships_cuda_compat"));
    GPUNODE_ASSIGN_OR_RETURN(f.label, r.OptString("label"));
    GPUNODE_ASSIGN_OR_RETURN(f.provenance, r.Prov(d.sources));
    d.image_families.push_back(std::move(f));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(im, "ngc_pytorch", [&](MapReader& r) -> Status {
    MonthCuda m;
    m.variant = "py3";
    GPUNODE_ASSIGN_OR_RETURN(std::string tag, r.String("tag"));
    m.tags.push_back(tag);
    GPUNODE_ASSIGN_OR_RETURN(m.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(m.provenance, r.Prov(d.sources));
    d.ngc_pytorch.push_back(std::move(m));
    return absl::OkStatus();
  }));
  GPUNODE_RETURN_IF_ERROR(ForEachItem(im, "tritonserver", [&](MapReader& r) -> Status {
    MonthCuda m;
    GPUNODE_ASSIGN_OR_RETURN(m.variant, r.String("variant"));
    GPUNODE_ASSIGN_OR_RETURN(m.tags, r.Strings("tags"));
    GPUNODE_ASSIGN_OR_RETURN(m.cuda, r.Ver("cuda"));
    GPUNODE_ASSIGN_OR_RETURN(m.provenance, r.Prov(d.sources));
    d.tritonserver.push_back(std::move(m));
    return absl::OkStatus();
  }));
  if (im.Has("releases")) {
    GPUNODE_RETURN_IF_ERROR(ForEachItem(im, "releases", [&](MapReader& r) -> Status {
      ImageRelease rel;
      GPUNODE_ASSIGN_OR_RETURN(rel.family, r.String("family"));
      if (!d.FindFamily(rel.family)) {
        return r.Node("family").Expected("an images.families[].family");
      }
      GPUNODE_ASSIGN_OR_RETURN(rel.variant, r.OptString("variant"));
      GPUNODE_ASSIGN_OR_RETURN(rel.tags, r.Strings("tags"));
      if (rel.tags.empty()) return r.Node("tags").Expected("at least one tag");
      GPUNODE_ASSIGN_OR_RETURN(rel.cuda, r.Ver("cuda"));
      GPUNODE_ASSIGN_OR_RETURN(rel.min_driver, r.OptString("min_driver"));
      GPUNODE_ASSIGN_OR_RETURN(rel.forward_compat, r.Strings("forward_compat", false));
      GPUNODE_ASSIGN_OR_RETURN(rel.provenance, r.Prov(d.sources));
      d.image_releases.push_back(std::move(rel));
      return absl::OkStatus();
    }));
  }
  GPUNODE_RETURN_IF_ERROR(im.Finish());
  return absl::OkStatus();
}

// Cross-checks the engine relies on.
Status CrossCheck(const CompatData& d, const std::string& origin) {
  for (size_t i = 0; i < d.gpus.size(); ++i) {
    if (!d.FindArchitecture(d.gpus[i].cc)) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": gpus[", i, "].cc: compute capability ", d.gpus[i].cc.ToString(), " of \"",
          d.gpus[i].name, "\" is not listed under architectures"));
    }
  }
  if (d.toolkits.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": toolkits: the list is empty"));
  }
  return absl::OkStatus();
}

// The whole document, section by section; every key of every map is checked.
Status ParseDocument(const YAML::Node& root, const std::string& origin, CompatData& d) {
  MapReader top(YamlValue(root, origin));
  GPUNODE_RETURN_IF_ERROR(ParseHeader(top, d));
  GPUNODE_RETURN_IF_ERROR(ParseCudaTables(top, d));
  GPUNODE_RETURN_IF_ERROR(ParseForwardCompat(top, d));
  GPUNODE_RETURN_IF_ERROR(ParseHardware(top, d));
  GPUNODE_RETURN_IF_ERROR(ParseFrameworks(top, d));
  GPUNODE_RETURN_IF_ERROR(ParseImages(top, d));
  GPUNODE_RETURN_IF_ERROR(top.Finish());
  return CrossCheck(d, origin);
}

}  // namespace

StatusOr<CompatData> ParseCompatData(absl::string_view yaml_text, absl::string_view origin) {
  CompatData d;
  d.origin = std::string(origin);
  try {
    auto loaded = LoadYaml(yaml_text, origin);  // nesting limit; never throws
    if (!loaded.ok()) return loaded.status();
    YAML::Node root = *std::move(loaded);
    if (!root.IsDefined() || root.IsNull()) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": the file is empty"));
    }
    GPUNODE_RETURN_IF_ERROR(ParseDocument(root, d.origin, d));
  } catch (const YAML::Exception& e) {
    std::string where(origin);
    if (e.mark.line >= 0) absl::StrAppend(&where, ":", e.mark.line + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": not valid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", e.what()));
  }
  return d;
}

StatusOr<CompatData> LoadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--data ", path, ": cannot open the file"));
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("--data ", path, ": read failed"));
  return ParseCompatData(buf.str(), path);
}

std::optional<Version> MaxCudaOfDriver(const CompatData& data, const Version& driver) {
  for (const DriverBranch& b : data.branches) {
    if (b.branch == static_cast<int>(driver.major()) && b.max_cuda) return b.max_cuda;
  }
  return std::nullopt;
}

}  // namespace gpunode::compat
