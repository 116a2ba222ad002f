#include "src/compat/refresh.h"

#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "src/compat/image_ref.h"

namespace gpunode::compat {

namespace {

const ImageFamily* FamilyOf(const CompatData& data, const ImageRef& ref) {
  for (const ImageFamily& f : data.image_families) {
    for (const std::string& r : f.repositories) {
      if (r == ref.Name()) return &f;
    }
  }
  return nullptr;
}

// Parsers that read the CUDA version from the tag itself: nothing to add to a table.
bool TagCarriesCuda(const std::string& parser) {
  return parser == "cuda" || parser == "pytorch" || parser == "tensorflow";
}

bool MonthTags(const std::string& parser) {
  return parser == "ngc-month" || parser == "triton-month" || parser == "ngc-table";
}

std::string Quote(absl::string_view s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

}  // namespace

RefreshProposal ProposeFromImages(const CompatData& data, const std::vector<ImageObservation>& images,
                                  absl::string_view date) {
  RefreshProposal out;
  std::string id = absl::StrCat("IMGCFG", absl::StrReplaceAll(date, {{"-", ""}}));
  std::vector<std::string> comments;
  // (family, variant, cuda) -> tags and the references they came from, in first-seen order.
  struct Row {
    std::vector<std::string> tags;
    std::vector<std::string> refs;
    bool disagrees = false;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Row> rows;
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  for (const ImageObservation& img : images) {
    auto ref = ParseImageRef(img.ref);
    if (!ref.ok()) {
      comments.push_back(absl::StrCat("# ", img.ref, ": ", ref.status().message()));
      ++out.skipped;
      continue;
    }
    if (!img.error.ok()) {
      comments.push_back(absl::StrCat("# ", img.ref, ": not read: ", img.error.message()));
      ++out.skipped;
      continue;
    }
    const ImageFamily* family = FamilyOf(data, *ref);
    if (!family) {
      comments.push_back(absl::StrCat("# ", img.ref, ": no family of the data set has repository ", ref->Name(),
                                      img.facts.cuda ? absl::StrCat(" (its CUDA_VERSION is ", img.facts.cuda->ToString(), ")")
                                                     : std::string(),
                                      "; add one under images.families first"));
      ++out.skipped;
      continue;
    }
    if (!img.facts.cuda) {
      comments.push_back(absl::StrCat("# ", img.ref, ": its config (", img.source, ") sets no CUDA_VERSION"));
      ++out.skipped;
      continue;
    }
    Version cuda = img.facts.cuda->parts().size() > 3 ? img.facts.cuda->Truncate(3) : *img.facts.cuda;
    auto known = WorkloadFromImage(data, img.ref);
    bool agrees = known.ok() && known->cuda && known->cuda->Truncate(2) == cuda.Truncate(2);
    if (TagCarriesCuda(family->parser)) {
      comments.push_back(absl::StrCat("# ", img.ref, ": the tag carries the CUDA version (", family->family,
                                      "); the image says ", cuda.ToString(), agrees ? ", in agreement" : ", which DIFFERS"));
      agrees ? ++out.agreeing : ++out.disagreeing;
      continue;
    }
    if (agrees && known->cuda->Truncate(3) == cuda.Truncate(3)) {
      comments.push_back(absl::StrCat("# ", img.ref, ": already in the data set (CUDA ", cuda.ToString(), ")"));
      ++out.agreeing;
      continue;
    }
    std::string tag = ref->tag, variant;
    if (tag.empty() || tag == "latest") {
      comments.push_back(absl::StrCat("# ", img.ref, ": a moving or missing tag is not a release; list a pinned tag"));
      ++out.skipped;
      continue;
    }
    if (MonthTags(family->parser)) {
      if (size_t dash = tag.find('-'); dash != std::string::npos) {
        variant = tag.substr(dash + 1);
        tag = tag.substr(0, dash);
      }
    }
    auto key = std::make_tuple(family->family, variant, cuda.ToString());
    if (!rows.count(key)) order.push_back(key);
    Row& row = rows[key];
    if (std::find(row.tags.begin(), row.tags.end(), tag) == row.tags.end()) row.tags.push_back(tag);
    row.refs.push_back(absl::StrCat(img.ref, img.digest.empty() ? "" : "@", img.digest));
    if (known.ok() && known->cuda) {
      row.disagrees = true;
      ++out.disagreeing;
      comments.push_back(absl::StrCat("# ", img.ref, ": the data set says CUDA ", known->cuda->ToString(),
                                      ", the image says ", cuda.ToString(), ": row proposed below, check it"));
    }
    ++out.proposed;
  }
  std::string& y = out.yaml;
  absl::StrAppend(&y, "# Proposed by `gpunode compat data --refresh-from-images` on ", date, ": ", images.size(),
                  " image(s), ", out.proposed, " proposed, ", out.agreeing, " already agree, ", out.disagreeing,
                  " differ, ", out.skipped, " skipped.\n# Review, then merge into data/compat.yaml.\n");
  for (const std::string& c : comments) absl::StrAppend(&y, c, "\n");
  if (order.empty()) return out;
  absl::StrAppend(&y, "sources:\n  ", id, ": ",
                  Quote(absl::StrCat("image configs (env CUDA_VERSION) read by gpunode on ", date)), "\n");
  absl::StrAppend(&y, "images:\n  releases:\n");
  for (const auto& key : order) {
    const Row& row = rows[key];
    std::vector<std::string> tags;
    for (const std::string& t : row.tags) tags.push_back(Quote(t));
    absl::StrAppend(&y, "    - {family: ", std::get<0>(key));
    if (!std::get<1>(key).empty()) absl::StrAppend(&y, ", variant: ", std::get<1>(key));
    absl::StrAppend(&y, ", tags: [", absl::StrJoin(tags, ", "), "], cuda: ", Quote(std::get<2>(key)),
                    ", source: ", Quote(absl::StrCat(id, " - ", absl::StrJoin(row.refs, ", "))),
                    ", confidence: official}", row.disagrees ? "  # DIFFERS from the data set" : "", "\n");
  }
  return out;
}

}  // namespace gpunode::compat
