#include "src/image/store_containers_storage.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/base/json.h"

namespace gpunode::image {

namespace {

// containers/storage's graph drivers; each keeps its images in <graph root>/<driver>-images.
constexpr const char* kDrivers[] = {"overlay", "vfs", "btrfs", "zfs", "devicemapper", "aufs", "overlay2"};
constexpr size_t kMaxConfBytes = 1u << 20;

bool IsHexId(absl::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f'); });
}

StatusOr<std::vector<std::string>> StringList(const nlohmann::json& e, const char* key, absl::string_view where) {
  std::vector<std::string> out;
  auto it = e.find(key);
  if (it == e.end() || it->is_null()) return out;
  if (!it->is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " is not a list"));
  for (const auto& v : *it) {
    if (!v.is_string()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " holds a non-string"));
    out.push_back(v.get<std::string>());
  }
  return out;
}

class ContainersStorageStore : public ImageStore {
 public:
  ContainersStorageStore(HostFs fs, ContainersStorageOptions o) : fs_(std::move(fs)), o_(std::move(o)) {
    name_ = absl::StrCat("containers-storage ", o_.graph_root);
  }

  std::string Name() const override { return name_; }
  std::string Kind() const override { return "containers-storage"; }

  StatusOr<ImageConfig> Find(const compat::ImageRef& ref) override {
    GPUNODE_ASSIGN_OR_RETURN(std::vector<Folder> folders, Load());
    const std::vector<std::string> names = CandidateNames(ref);
    std::vector<std::string> mismatched;
    for (const Folder& f : folders) {
      for (const CsImage& img : f.images) {
        bool named = std::any_of(img.names.begin(), img.names.end(), [&](const std::string& n) {
          return std::find(names.begin(), names.end(), n) != names.end();
        });
        const bool has_digest =
            !ref.digest.empty() && (img.digest == ref.digest ||
                                    std::find(img.digests.begin(), img.digests.end(), ref.digest) != img.digests.end());
        if (!ref.digest.empty() && named && !has_digest) {
          mismatched.push_back(absl::StrCat(img.names.front(), " is ", img.digest));
          continue;
        }
        // Pinned by digest: any name of the same repository will do.
        if (!named && has_digest) {
          named = std::any_of(img.names.begin(), img.names.end(),
                              [&](const std::string& n) { return RepositoryOf(n) == ref.Name(); });
        }
        if (!named) continue;
        const std::string shown = names.front();
        return Resolve(f, img, shown);
      }
    }
    std::string msg = absl::StrCat(name_, ": image ", absl::StrJoin(names, " or "), " not found");
    if (!mismatched.empty()) absl::StrAppend(&msg, " (other digests: ", absl::StrJoin(mismatched, "; "), ")");
    return absl::NotFoundError(msg);
  }

  StatusOr<std::vector<StoredImage>> List() override {
    GPUNODE_ASSIGN_OR_RETURN(std::vector<Folder> folders, Load());
    std::vector<StoredImage> out;
    for (const Folder& f : folders) {
      for (const CsImage& img : f.images) {
        if (out.size() >= o_.store.max_images) {
          return absl::ResourceExhaustedError(absl::StrCat(name_, ": more than ", o_.store.max_images,
                                                     " images (gpunode lists at most that many)"));
        }
        StoredImage si;
        si.id = img.id;
        si.names = img.names;
        auto c = Resolve(f, img, img.names.empty() ? img.id : img.names.front());
        if (c.ok()) {
          si.config = std::move(*c);
        } else {
          si.error = std::string(c.status().message());
        }
        out.push_back(std::move(si));
      }
    }
    return out;
  }

 private:
  struct Folder {
    std::string dir;  // host path of <graph root>/<driver>-images
    std::vector<CsImage> images;
  };

  StatusOr<std::vector<Folder>> Load() {
    if (!fs_.Exists(o_.graph_root)) {
      return absl::UnavailableError(absl::StrCat(name_, ": no such folder (no podman or CRI-O storage here; "
                                           "--storage-root names another)"));
    }
    std::vector<std::string> drivers;
    if (!o_.driver.empty()) {
      drivers.push_back(o_.driver);
    } else {
      for (const char* d : kDrivers) {
        if (fs_.Exists(absl::StrCat(o_.graph_root, "/", d, "-images/images.json"))) drivers.push_back(d);
      }
      if (drivers.empty()) {
        return absl::NotFoundError(absl::StrCat(name_, ": no <driver>-images/images.json (no image stored yet)"));
      }
    }
    std::vector<Folder> out;
    for (const std::string& d : drivers) {
      Folder f;
      f.dir = absl::StrCat(o_.graph_root, "/", d, "-images");
      const std::string file = f.dir + "/images.json";
      auto text = fs_.ReadFile(file, kMaxImagesJsonBytes);
      if (!text.ok()) {
        if (absl::IsNotFound(text.status())) {
          return absl::NotFoundError(absl::StrCat(name_, ": ", file, " does not exist (driver ", d, " holds no image)"));
        }
        return Status(text.status().code(), absl::StrCat(name_, ": ", text.status().message()));
      }
      GPUNODE_ASSIGN_OR_RETURN(f.images, ParseImagesJson(*text, absl::StrCat(name_, ": ", file), o_.store.max_images));
      out.push_back(std::move(f));
    }
    return out;
  }

  // A big-data item of an image, at most max_bytes, checked against `digest` when it names one.
  StatusOr<std::string> BigData(const Folder& f, const CsImage& img, const std::string& key, size_t max_bytes,
                                absl::string_view digest) {
    if (std::find(img.big_data_names.begin(), img.big_data_names.end(), key) == img.big_data_names.end()) {
      return absl::NotFoundError(absl::StrCat(name_, ": image ", img.id, " has no big-data item \"", key, "\""));
    }
    const std::string path = absl::StrCat(f.dir, "/", img.id, "/", BigDataFileName(key));
    auto data = fs_.ReadFile(path, max_bytes);
    if (!data.ok()) {
      return Status(data.status().code(), absl::StrCat(name_, ": ", data.status().message()));
    }
    if (!digest.empty()) GPUNODE_RETURN_IF_ERROR(VerifyDigest(*data, digest, absl::StrCat(name_, ": ", path)));
    return data;
  }

  StatusOr<ImageConfig> Resolve(const Folder& f, const CsImage& img, const std::string& shown) {
    const std::string where = absl::StrCat(name_, ": image ", shown);
    Descriptor top;
    top.digest = img.digest;
    std::string text;
    // "manifest" is the manifest the image was stored with; its digest is img.digest (checked
    // when it names one: a Docker schema1 manifest's digest is not the file's).
    GPUNODE_ASSIGN_OR_RETURN(text, BigData(f, img, "manifest", kMaxManifestBytes, ""));
    if (!img.digest.empty() && Sha256Digest(text) != img.digest) top.digest = Sha256Digest(text);
    BlobReader read = [&](const Descriptor& d, size_t max) -> StatusOr<std::string> {
      GPUNODE_RETURN_IF_ERROR(CheckDigest(d.digest, absl::StrCat(where, ": digest")));
      // A manifest of a pulled list is stored as "manifest-<digest>", a config under its digest.
      auto m = BigData(f, img, "manifest-" + d.digest, max, d.digest);
      if (absl::IsNotFound(m.status())) m = BigData(f, img, d.digest, max, d.digest);
      if (!absl::IsNotFound(m.status())) return m;
      // A list made with `podman manifest create/add` holds only the list: each instance is an
      // image of its own, known by its manifest digest.
      for (const CsImage& other : f.images) {
        if (&other == &img) continue;
        const bool is_it = other.digest == d.digest ||
                           std::find(other.digests.begin(), other.digests.end(), d.digest) != other.digests.end();
        if (is_it) return BigData(f, other, "manifest-" + d.digest, max, d.digest);
        if (std::find(other.big_data_names.begin(), other.big_data_names.end(), d.digest) != other.big_data_names.end()) {
          return BigData(f, other, d.digest, max, d.digest);
        }
      }
      return absl::NotFoundError(absl::StrCat(where, ": blob ", d.digest, " is in no image of the store"));
    };
    GPUNODE_ASSIGN_OR_RETURN(ResolvedImage r, ResolveConfig(text, top, o_.store.platform, read, where));
    return ConfigFromResolved(r, shown, img.digest.empty() ? top.digest : img.digest,
                              absl::StrCat("image config (containers-storage ", o_.graph_root, ")"),
                              "containers-storage", where);
  }

  HostFs fs_;
  ContainersStorageOptions o_;
  std::string name_;
};

StatusOr<std::string> ConfValue(absl::string_view raw, absl::string_view where) {
  raw = absl::StripAsciiWhitespace(raw);
  if (raw.size() >= 2 && (raw.front() == '"' || raw.front() == '\'')) {
    const char q = raw.front();
    const size_t end = raw.find(q, 1);
    if (end == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat(where, ": unterminated string"));
    absl::string_view rest = absl::StripAsciiWhitespace(raw.substr(end + 1));
    if (!rest.empty() && rest.front() != '#') {
      return absl::InvalidArgumentError(absl::StrCat(where, ": text after the value"));
    }
    absl::string_view v = raw.substr(1, end - 1);
    if (q == '"' && absl::StrContains(v, "\\")) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": escapes in the value are not read by gpunode"));
    }
    return std::string(v);
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": expected a quoted string"));
}

}  // namespace

StatusOr<StorageConf> ParseStorageConf(absl::string_view text, absl::string_view file) {
  StorageConf c;
  bool in_storage = false;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    if (line.front() == '[') {
      absl::string_view header = line;
      if (size_t hash = header.find('#'); hash != absl::string_view::npos) header = header.substr(0, hash);
      header = absl::StripAsciiWhitespace(header);
      in_storage = header == "[storage]";
      continue;
    }
    if (!in_storage) continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) continue;
    const absl::string_view key = absl::StripAsciiWhitespace(line.substr(0, eq));
    std::string* dst = key == "driver" ? &c.driver
                       : key == "graphroot" ? &c.graph_root
                       : key == "rootless_storage_path" ? &c.rootless_storage_path
                                                        : nullptr;
    if (dst == nullptr) continue;
    GPUNODE_ASSIGN_OR_RETURN(*dst, ConfValue(line.substr(eq + 1), absl::StrCat(file, ":", line_no, ": storage.", key)));
  }
  return c;
}

std::string BigDataFileName(absl::string_view key) {
  const bool plain = std::all_of(key.begin(), key.end(), [](char ch) {
    return ch == '.' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z');
  });
  if (plain) return std::string(key);
  return "=" + absl::Base64Escape(key);
}

StatusOr<std::vector<CsImage>> ParseImagesJson(absl::string_view text, absl::string_view file,
                                               size_t max_images) {
  auto doc = ParseJson(text, file);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(doc.status().message(),
                                             " (images.json cut short or not containers-storage's)"));
  }
  if (!doc->is_array()) return absl::InvalidArgumentError(absl::StrCat(file, ": not a list of images"));
  if (doc->size() > max_images) {
    return absl::ResourceExhaustedError(absl::StrCat(file, ": ", doc->size(), " images, more than the ",
                                               max_images, " gpunode reads"));
  }
  std::vector<CsImage> out;
  for (size_t i = 0; i < doc->size(); ++i) {
    const nlohmann::json& e = (*doc)[i];
    const std::string where = absl::StrCat(file, ": [", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not an object"));
    CsImage img;
    auto id = e.find("id");
    if (id == e.end() || !id->is_string() || !IsHexId(id->get<std::string>())) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": id is missing or not 64 hex digits"));
    }
    img.id = id->get<std::string>();
    if (auto d = e.find("digest"); d != e.end() && !d->is_null()) {
      if (!d->is_string()) return absl::InvalidArgumentError(absl::StrCat(where, ": digest is not a string"));
      img.digest = d->get<std::string>();
    }
    GPUNODE_ASSIGN_OR_RETURN(img.digests, StringList(e, "digests", where));
    GPUNODE_ASSIGN_OR_RETURN(img.names, StringList(e, "names", where));
    GPUNODE_ASSIGN_OR_RETURN(img.big_data_names, StringList(e, "big-data-names", where));
    out.push_back(std::move(img));
  }
  return out;
}

StatusOr<ContainersStorageOptions> DefaultContainersStorage(const HostFs& fs, bool rootless,
                                                            const std::string& home) {
  ContainersStorageOptions o;
  auto read_conf = [&](const std::string& path) -> StatusOr<std::optional<StorageConf>> {
    if (!fs.Exists(path)) return std::optional<StorageConf>();
    GPUNODE_ASSIGN_OR_RETURN(std::string text, fs.ReadFile(path, kMaxConfBytes));
    GPUNODE_ASSIGN_OR_RETURN(StorageConf c, ParseStorageConf(text, path));
    return std::optional<StorageConf>(c);
  };
  std::optional<StorageConf> system;
  for (const char* path : {kStorageConf, kStorageConfDistro}) {
    GPUNODE_ASSIGN_OR_RETURN(system, read_conf(path));
    if (system) break;
  }
  if (rootless && !home.empty()) {
    GPUNODE_ASSIGN_OR_RETURN(std::optional<StorageConf> user, read_conf(home + "/.config/containers/storage.conf"));
    if (user && !user->graph_root.empty()) {
      o.graph_root = user->graph_root;
      o.driver = user->driver;
    } else if (system && !system->rootless_storage_path.empty()) {
      o.graph_root = absl::StrReplaceAll(system->rootless_storage_path, {{"$HOME", home}});
    } else {
      o.graph_root = home + "/.local/share/containers/storage";
    }
    return o;
  }
  if (system) {
    o.graph_root = system->graph_root;
    o.driver = system->driver;
  }
  if (o.graph_root.empty()) o.graph_root = kGraphRoot;
  return o;
}

std::unique_ptr<ImageStore> NewContainersStorageStore(const HostFs& fs, ContainersStorageOptions options) {
  return std::make_unique<ContainersStorageStore>(fs, std::move(options));
}

}  // namespace gpunode::image
