// `gpunode compat data --refresh-from-images FILE`: the data-set entries that images' own configs
// propose (issue 32). The data set stays the source for what images do not say and for offline
// use; this turns "read the image" into rows a maintainer reviews and pastes into
// data/compat.yaml — it never edits the file. Pure: the CLI reads each image's config (src/image)
// and passes what it found.
#ifndef GPUNODE_COMPAT_REFRESH_H_
#define GPUNODE_COMPAT_REFRESH_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "src/base/status.h"
#include "src/compat/dataset.h"
#include "src/compat/image_facts.h"

namespace gpunode::compat {

// One image of the list, as read (or not).
struct ImageObservation {
  std::string ref;     // as listed
  std::string digest;  // manifest digest when known
  std::string source;  // "registry docker.io", "image config (containerd, k8s.io)"
  ImageCudaFacts facts;
  Status error;        // not ok: the image could not be read (named in the output)
};

struct RefreshProposal {
  std::string yaml;  // a `sources:` entry and `images.releases` rows, with a comment per image
  int proposed = 0;   // images that became (part of) a proposed row
  int agreeing = 0;   // the data set already says the same
  int disagreeing = 0;  // the data set says another CUDA (the row is proposed, flagged)
  int skipped = 0;    // unknown family, no CUDA_VERSION, the tag carries the version, unreadable
};

// `date` ("2026-12-03") names the proposed source id IMGCFG<yyyymmdd>.
RefreshProposal ProposeFromImages(const CompatData& data, const std::vector<ImageObservation>& images,
                                  absl::string_view date);

}  // namespace gpunode::compat

#endif  // GPUNODE_COMPAT_REFRESH_H_
