#include "src/image/store_containerd.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "containerd/services/content/v1/content.grpc.pb.h"
#include "containerd/services/images/v1/images.grpc.pb.h"
#include "containerd/services/namespaces/v1/namespace.grpc.pb.h"

namespace gpunode::image {

namespace {

namespace ctrd_content = ::containerd::services::content::v1;
namespace ctrd_images = ::containerd::services::images::v1;
namespace ctrd_ns = ::containerd::services::namespaces::v1;

// containerd's answers are small; the biggest is Images.List (a few hundred bytes an image).
constexpr int kMaxReceiveBytes = 16 << 20;
constexpr size_t kMaxNamespaces = 256;

absl::StatusCode CodeOf(grpc::StatusCode c) {
  switch (c) {
    case grpc::StatusCode::NOT_FOUND: return absl::StatusCode::kNotFound;
    case grpc::StatusCode::UNAVAILABLE: return absl::StatusCode::kUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return absl::StatusCode::kDeadlineExceeded;
    case grpc::StatusCode::INVALID_ARGUMENT: return absl::StatusCode::kInvalidArgument;
    case grpc::StatusCode::PERMISSION_DENIED: return absl::StatusCode::kPermissionDenied;
    case grpc::StatusCode::UNIMPLEMENTED: return absl::StatusCode::kUnimplemented;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return absl::StatusCode::kResourceExhausted;
    default: return absl::StatusCode::kUnknown;
  }
}

class ContainerdStore : public ImageStore {
 public:
  ContainerdStore(HostFs fs, ContainerdOptions o) : fs_(fs), o_(std::move(o)) {
    name_ = absl::StrCat("containerd ", o_.socket);
  }

  std::string Name() const override { return name_; }
  std::string Kind() const override { return "containerd"; }

  StatusOr<ImageConfig> Find(const compat::ImageRef& ref) override {
    GPUNODE_RETURN_IF_ERROR(Connect());
    GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> namespaces, Namespaces());
    const std::vector<std::string> names = CandidateNames(ref);
    if (namespaces.empty()) {
      return absl::NotFoundError(absl::StrCat(name_, ": no namespace (containerd holds no image)"));
    }
    std::vector<std::string> mismatched;
    for (const std::string& ns : namespaces) {
      for (const std::string& name : names) {
        ctrd_images::GetImageRequest req;
        req.set_name(name);
        ctrd_images::GetImageResponse resp;
        grpc::ClientContext ctx;
        Prepare(ctx, ns);
        grpc::Status s = images_->Get(&ctx, req, &resp);
        if (s.error_code() == grpc::StatusCode::NOT_FOUND) continue;
        if (!s.ok()) return Error(s, ns, absl::StrCat("Images.Get ", name));
        const auto& target = resp.image().target();
        // "repo:tag" found, but the reference pins another digest: not this image.
        if (!ref.digest.empty() && !absl::StrContains(name, "@") && target.digest() != ref.digest) {
          mismatched.push_back(absl::StrCat(ns, ": ", name, " is ", target.digest()));
          continue;
        }
        return Resolve(ns, name, target);
      }
    }
    std::string msg = absl::StrCat(name_, ": ", namespaces.size() == 1 ? "namespace " : "namespaces ",
                                   absl::StrJoin(namespaces, ", "), ": image ", absl::StrJoin(names, " or "),
                                   " not found");
    if (!mismatched.empty()) absl::StrAppend(&msg, " (other digests: ", absl::StrJoin(mismatched, "; "), ")");
    return absl::NotFoundError(msg);
  }

  StatusOr<std::vector<StoredImage>> List() override {
    GPUNODE_RETURN_IF_ERROR(Connect());
    GPUNODE_ASSIGN_OR_RETURN(std::vector<std::string> namespaces, Namespaces());
    std::vector<StoredImage> out;
    for (const std::string& ns : namespaces) {
      ctrd_images::ListImagesRequest req;
      ctrd_images::ListImagesResponse resp;
      grpc::ClientContext ctx;
      Prepare(ctx, ns);
      grpc::Status s = images_->List(&ctx, req, &resp);
      if (!s.ok()) return Error(s, ns, "Images.List");
      // The CRI keeps one image under several names (repo:tag, repo@digest, its config id):
      // one entry per target, with every name.
      std::map<std::string, size_t> by_target;
      for (const auto& img : resp.images()) {
        const std::string& digest = img.target().digest();
        auto [it, added] = by_target.emplace(digest, out.size());
        if (added) {
          if (out.size() >= o_.store.max_images) {
            return absl::ResourceExhaustedError(absl::StrCat(name_, ": more than ", o_.store.max_images,
                                                       " images (gpunode lists at most that many)"));
          }
          StoredImage si;
          si.namespace_name = ns;
          si.id = digest;
          out.push_back(std::move(si));
        }
        out[it->second].names.push_back(img.name());
      }
      for (const auto& img : resp.images()) {
        StoredImage& si = out[by_target[img.target().digest()]];
        if (!si.config.source.empty() || !si.error.empty()) continue;
        // The name to read it under: a real reference rather than a bare "sha256:" id.
        std::string name = si.names.front();
        for (const std::string& n : si.names) {
          if (!absl::StartsWith(n, "sha256:")) {
            name = n;
            break;
          }
        }
        auto c = Resolve(ns, name, img.target());
        if (c.ok()) {
          si.config = std::move(*c);
        } else {
          si.error = std::string(c.status().message());
          if (c.status().code() == absl::StatusCode::kDeadlineExceeded ||
              c.status().code() == absl::StatusCode::kUnavailable) {
            return c.status();
          }
        }
      }
    }
    return out;
  }

 private:
  Status Connect() {
    if (images_) return absl::OkStatus();
    GPUNODE_ASSIGN_OR_RETURN(std::string local, fs_.LocalPath(o_.socket));
    GPUNODE_RETURN_IF_ERROR(CheckUnixSocket(local, name_));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxReceiveBytes);
    args.SetUserAgentPrefix("gpunode");
    auto channel = grpc::CreateCustomChannel(absl::StrCat("unix:", local), grpc::InsecureChannelCredentials(), args);
    images_ = ctrd_images::Images::NewStub(channel);
    content_ = ctrd_content::Content::NewStub(channel);
    namespaces_ = ctrd_ns::Namespaces::NewStub(channel);
    return absl::OkStatus();
  }

  void Prepare(grpc::ClientContext& ctx, const std::string& ns) const {
    ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(o_.store.timeout));
    if (!ns.empty()) ctx.AddMetadata("containerd-namespace", ns);
  }

  Status Error(const grpc::Status& s, absl::string_view ns, absl::string_view call) const {
    std::string what = absl::StrCat(name_, ": ");
    if (!ns.empty()) absl::StrAppend(&what, "namespace ", ns, ": ");
    absl::StrAppend(&what, call, ": ");
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      absl::StrAppend(&what, "no answer within ", absl::FormatDuration(o_.store.timeout));
    } else {
      absl::StrAppend(&what, s.error_message());
    }
    return Status(CodeOf(s.error_code()), what);
  }

  StatusOr<std::vector<std::string>> Namespaces() {
    if (!o_.namespace_name.empty()) return std::vector<std::string>{o_.namespace_name};
    ctrd_ns::ListNamespacesRequest req;
    ctrd_ns::ListNamespacesResponse resp;
    grpc::ClientContext ctx;
    Prepare(ctx, "");
    grpc::Status s = namespaces_->List(&ctx, req, &resp);
    if (!s.ok()) return Error(s, "", "Namespaces.List");
    if (static_cast<size_t>(resp.namespaces_size()) > kMaxNamespaces) {
      return absl::ResourceExhaustedError(absl::StrCat(name_, ": more than ", kMaxNamespaces, " namespaces"));
    }
    std::vector<std::string> listed;
    for (const auto& n : resp.namespaces()) listed.push_back(n.name());
    return OrderNamespaces(std::move(listed));
  }

  StatusOr<std::string> ReadBlob(const std::string& ns, const Descriptor& d, size_t max_bytes) {
    GPUNODE_RETURN_IF_ERROR(CheckDigest(d.digest, absl::StrCat(name_, ": namespace ", ns, ": blob")));
    ctrd_content::ReadContentRequest req;
    req.set_digest(d.digest);
    grpc::ClientContext ctx;
    Prepare(ctx, ns);
    std::unique_ptr<grpc::ClientReader<ctrd_content::ReadContentResponse>> reader = content_->Read(&ctx, req);
    ctrd_content::ReadContentResponse piece;
    std::string data;
    bool too_big = false;
    while (reader->Read(&piece)) {
      if (data.size() + piece.data().size() > max_bytes) {
        too_big = true;
        ctx.TryCancel();
        break;
      }
      data += piece.data();
    }
    grpc::Status s = reader->Finish();
    if (too_big) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ": namespace ", ns, ": blob ", d.digest,
                                               " is larger than the ", max_bytes, " bytes gpunode reads"));
    }
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::NotFoundError(absl::StrCat(name_, ": namespace ", ns, ": blob ", d.digest,
                                        " is not in the content store (containerd keeps only what it pulled: "
                                        "pull the image for this platform)"));
    }
    if (!s.ok()) return Error(s, ns, absl::StrCat("Content.Read ", d.digest));
    GPUNODE_RETURN_IF_ERROR(VerifyDigest(data, d.digest, absl::StrCat(name_, ": namespace ", ns, ": blob ", d.digest)));
    return data;
  }

  StatusOr<ImageConfig> Resolve(const std::string& ns, const std::string& name,
                                const ::containerd::types::Descriptor& target) {
    const std::string where = absl::StrCat(name_, ": namespace ", ns, ": image ", name);
    Descriptor top;
    top.digest = target.digest();
    top.media_type = target.media_type();
    top.size = target.size();
    if (top.size > static_cast<int64_t>(kMaxManifestBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": its manifest is ", top.size,
                                               " bytes, more than the ", kMaxManifestBytes, " gpunode reads"));
    }
    GPUNODE_ASSIGN_OR_RETURN(std::string text, ReadBlob(ns, top, kMaxManifestBytes));
    BlobReader read = [this, &ns](const Descriptor& d, size_t max) { return ReadBlob(ns, d, max); };
    GPUNODE_ASSIGN_OR_RETURN(ResolvedImage r, ResolveConfig(text, top, o_.store.platform, read, where));
    return ConfigFromResolved(r, name, top.digest, absl::StrCat("image config (containerd, ", ns, ")"), "containerd",
                              where);
  }

  HostFs fs_;
  ContainerdOptions o_;
  std::string name_;
  std::unique_ptr<ctrd_images::Images::Stub> images_;
  std::unique_ptr<ctrd_content::Content::Stub> content_;
  std::unique_ptr<ctrd_ns::Namespaces::Stub> namespaces_;
};

}  // namespace

std::vector<std::string> OrderNamespaces(std::vector<std::string> listed) {
  std::vector<std::string> out;
  std::set<std::string> have(listed.begin(), listed.end());
  for (const char* first : {"k8s.io", "moby", "default"}) {
    if (have.count(first)) out.push_back(first);
  }
  std::sort(listed.begin(), listed.end());
  for (const std::string& n : listed) {
    if (n != "k8s.io" && n != "moby" && n != "default" && (out.empty() || out.back() != n)) out.push_back(n);
  }
  return out;
}

std::unique_ptr<ImageStore> NewContainerdStore(const HostFs& fs, ContainerdOptions options) {
  return std::make_unique<ContainerdStore>(fs, std::move(options));
}

}  // namespace gpunode::image
