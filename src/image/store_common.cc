#include "src/image/store_common.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/base/json.h"

namespace gpunode::image {

namespace {

// Media types of indexes and manifests (OCI image-spec media-types.md; Docker's
// distribution/manifest/manifestlist and schema2).
constexpr absl::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr absl::string_view kDockerList = "application/vnd.docker.distribution.manifest.list.v2+json";
constexpr absl::string_view kOciManifest = "application/vnd.oci.image.manifest.v1+json";
constexpr absl::string_view kDockerManifest = "application/vnd.docker.distribution.manifest.v2+json";
constexpr int kMaxIndexDepth = 2;

bool IsIndexType(absl::string_view t) { return t == kOciIndex || t == kDockerList; }
bool IsManifestType(absl::string_view t) { return t == kOciManifest || t == kDockerManifest; }

StatusOr<Descriptor> ReadDescriptor(const nlohmann::json& j, absl::string_view where) {
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, " is not an object"));
  Descriptor d;
  auto mt = j.find("mediaType");
  if (mt != j.end() && !mt->is_null()) {
    if (!mt->is_string()) return absl::InvalidArgumentError(absl::StrCat(where, ".mediaType is not a string"));
    d.media_type = mt->get<std::string>();
  }
  auto dg = j.find("digest");
  if (dg == j.end() || !dg->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".digest is missing or not a string"));
  }
  d.digest = dg->get<std::string>();
  GPUNODE_RETURN_IF_ERROR(CheckDigest(d.digest, absl::StrCat(where, ".digest")));
  auto sz = j.find("size");
  if (sz != j.end() && !sz->is_null()) {
    if (!sz->is_number_integer() || sz->get<int64_t>() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".size is not a byte count"));
    }
    d.size = sz->get<int64_t>();
  }
  return d;
}

std::string PlatformOf(const nlohmann::json& entry) {
  auto p = entry.find("platform");
  if (p == entry.end() || !p->is_object()) return "(no platform)";
  auto str = [&](const char* k) {
    auto it = p->find(k);
    return it != p->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string s = absl::StrCat(str("os"), "/", str("architecture"));
  if (!str("variant").empty()) absl::StrAppend(&s, "/", str("variant"));
  return s;
}

Status Prefixed(const Status& s, absl::string_view source) {
  return Status(s.code(), absl::StrCat(source, ": ", s.message()));
}

}  // namespace

std::string Platform::ToString() const {
  return variant.empty() ? absl::StrCat(os, "/", architecture) : absl::StrCat(os, "/", architecture, "/", variant);
}

std::string NormalizeArchitecture(absl::string_view a) {
  if (a == "x86_64" || a == "x86-64") return "amd64";
  if (a == "aarch64") return "arm64";
  return std::string(a);
}

StatusOr<Platform> ParsePlatform(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(absl::AsciiStrToLower(text), '/');
  auto word = [](const std::string& s) {
    return !s.empty() && s.size() <= 32 && std::all_of(s.begin(), s.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
  };
  if (parts.size() < 2 || parts.size() > 3 || !std::all_of(parts.begin(), parts.end(), word)) {
    return absl::InvalidArgumentError(absl::StrCat("platform \"", text.substr(0, 80),
                                                   "\": expected OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64/v8"));
  }
  Platform p;
  p.os = parts[0];
  p.architecture = NormalizeArchitecture(parts[1]);
  if (parts.size() == 3) p.variant = parts[2];
  return p;
}

bool PlatformMatches(const Platform& want, absl::string_view os, absl::string_view architecture,
                     absl::string_view variant) {
  if (want.os != os || want.architecture != architecture) return false;
  if (want.variant.empty()) return true;
  // containerd's platforms package: arm64 without a variant is v8.
  if (architecture == "arm64" && variant.empty()) variant = "v8";
  return want.variant == variant;
}

std::vector<std::string> CandidateNames(const compat::ImageRef& ref) {
  std::vector<std::string> out;
  const std::string name = ref.Name();
  if (!ref.digest.empty()) {
    if (!ref.tag.empty() && !ref.tag_defaulted) out.push_back(absl::StrCat(name, ":", ref.tag, "@", ref.digest));
    out.push_back(absl::StrCat(name, "@", ref.digest));
  }
  if (!ref.tag.empty()) out.push_back(absl::StrCat(name, ":", ref.tag));
  return out;
}

std::string RepositoryOf(absl::string_view stored_name) {
  auto ref = compat::ParseImageRef(stored_name);
  return ref.ok() ? ref->Name() : std::string();
}

std::string Sha256Digest(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

Status CheckDigest(absl::string_view digest, absl::string_view what) {
  absl::string_view hex = digest;
  if (!absl::ConsumePrefix(&hex, "sha256:") || hex.size() != 64 ||
      !std::all_of(hex.begin(), hex.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); })) {
    std::string shown(digest.substr(0, 80));
    return absl::InvalidArgumentError(absl::StrCat(what, " \"", shown,
                                             "\" is not a sha256 digest (sha256:<64 lower-case hex>)"));
  }
  return absl::OkStatus();
}

Status VerifyDigest(absl::string_view data, absl::string_view digest, absl::string_view what) {
  const size_t colon = digest.find(':');
  const absl::string_view algo = digest.substr(0, colon == absl::string_view::npos ? 0 : colon);
  const absl::string_view hex = colon == absl::string_view::npos ? "" : digest.substr(colon + 1);
  const EVP_MD* md = algo == "sha256" ? EVP_sha256() : algo == "sha512" ? EVP_sha512() : nullptr;
  if (md == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": digest \"", digest.substr(0, 80),
                                                   "\" is not sha256:<hex> or sha512:<hex>"));
  }
  const size_t want_len = static_cast<size_t>(EVP_MD_get_size(md)) * 2;
  if (hex.size() != want_len ||
      !std::all_of(hex.begin(), hex.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); })) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": digest \"", digest.substr(0, 80), "\" is malformed"));
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, md, nullptr);
  const std::string got = absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(out), len));
  if (got != hex) {
    return absl::DataLossError(absl::StrCat(what, ": bad digest: the content hashes to ", algo, ":", got,
                                            ", not ", digest));
  }
  return absl::OkStatus();
}

StatusOr<ResolvedImage> ResolveConfig(absl::string_view top, const Descriptor& top_desc,
                                      const Platform& platform, const BlobReader& read,
                                      absl::string_view source) {
  std::string doc_text(top);
  std::string doc_digest = top_desc.digest;
  std::string media_type = top_desc.media_type;  // from the parent's descriptor
  for (int depth = 0;; ++depth) {
    const std::string where = absl::StrCat(source, ": ", depth == 0 ? "manifest " : "platform manifest ", doc_digest);
    auto parsed = ParseJson(doc_text, where);
    if (!parsed.ok()) return parsed.status();
    const nlohmann::json& doc = *parsed;
    if (!doc.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
    std::string own_type;
    if (auto mt = doc.find("mediaType"); mt != doc.end() && mt->is_string()) own_type = mt->get<std::string>();
    const std::string type = !own_type.empty() ? own_type : media_type;
    const bool is_index = IsIndexType(type) || (!IsManifestType(type) && doc.contains("manifests"));
    if (!is_index) {
      auto cfg = doc.find("config");
      if (cfg == doc.end()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": neither an index (\"manifests\") nor a manifest (\"config\")",
                                                 type.empty() ? "" : absl::StrCat(", media type ", type)));
      }
      auto d = ReadDescriptor(*cfg, "config");
      if (!d.ok()) return Prefixed(d.status(), where);
      if (d->size > static_cast<int64_t>(kMaxConfigBytes)) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": config ", d->digest, " is ", d->size,
                                                 " bytes, more than the ", kMaxConfigBytes, " gpunode reads"));
      }
      auto blob = read(*d, kMaxConfigBytes);
      if (!blob.ok()) return blob.status();
      ResolvedImage r;
      r.manifest_digest = doc_digest;
      r.config = *d;
      r.config_json = std::move(*blob);
      return r;
    }
    if (depth >= kMaxIndexDepth) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": indexes nested more than ", kMaxIndexDepth, " deep"));
    }
    auto manifests = doc.find("manifests");
    if (manifests == doc.end() || !manifests->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": index without a \"manifests\" list"));
    }
    const nlohmann::json* chosen = nullptr;
    std::vector<std::string> seen;
    for (const nlohmann::json& e : *manifests) {
      if (!e.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": an entry of manifests is not an object"));
      auto p = e.find("platform");
      std::string os, arch, variant;
      if (p != e.end() && p->is_object()) {
        auto s = [&](const char* k) {
          auto it = p->find(k);
          return it != p->end() && it->is_string() ? it->get<std::string>() : std::string();
        };
        os = s("os");
        arch = s("architecture");
        variant = s("variant");
      }
      if (os == "unknown" || os.empty()) continue;  // attestations, signatures
      seen.push_back(PlatformOf(e));
      if (PlatformMatches(platform, os, arch, variant)) {
        chosen = &e;
        break;
      }
    }
    if (chosen == nullptr) {
      return absl::NotFoundError(absl::StrCat(where, ": no image for ", platform.ToString(), " (the index has: ",
                                        seen.empty() ? "none" : absl::StrJoin(seen, ", "), ")"));
    }
    auto d = ReadDescriptor(*chosen, "manifests[]");
    if (!d.ok()) return Prefixed(d.status(), where);
    if (d->size > static_cast<int64_t>(kMaxManifestBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": manifest ", d->digest, " is ", d->size,
                                               " bytes, more than the ", kMaxManifestBytes, " gpunode reads"));
    }
    auto next = read(*d, kMaxManifestBytes);
    if (!next.ok()) return next.status();
    doc_text = std::move(*next);
    doc_digest = d->digest;
    media_type = d->media_type;
  }
}

Status CheckUnixSocket(const std::string& local_path, absl::string_view store) {
  struct stat st;
  if (::stat(local_path.c_str(), &st) != 0) {
    const int err = errno;
    return absl::UnavailableError(absl::StrCat(store, ": no socket at ", local_path, " (", std::strerror(err),
                                         "): is it running, and is this its socket?"));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::UnavailableError(absl::StrCat(store, ": ", local_path, " is not a socket"));
  }
  return absl::OkStatus();
}

StatusOr<ImageConfig> ConfigFromResolved(const ResolvedImage& r, absl::string_view reference,
                                         absl::string_view top_digest, absl::string_view source,
                                         absl::string_view source_kind, absl::string_view error_prefix) {
  auto c = ParseImageConfig(r.config_json, absl::StrCat(error_prefix, ": config ", r.config.digest));
  if (!c.ok()) return c.status();
  c->reference = std::string(reference);
  c->digest = std::string(top_digest);
  c->config_digest = r.config.digest;
  c->source = std::string(source);
  c->source_kind = std::string(source_kind);
  return c;
}

}  // namespace gpunode::image
