// containers-storage, the image store of podman, CRI-O, buildah and skopeo, read from its files:
// the graph root (storage.conf's [storage] graphroot, default /var/lib/containers/storage; rootless
// ~/.local/share/containers/storage) holds <driver>-images/images.json — every image's id, names,
// manifest digest and the keys of its "big data" — and <driver>-images/<id>/<file> per big-data
// item: "manifest" (the manifest it was pulled or built with, an index for a manifest list),
// "manifest-<digest>" (each manifest by digest), and the config blob under its digest as key. File
// names are containers/storage's makeBigDataBaseName: the key itself when it is only [a-z0-9.],
// else "=" + base64 (standard, padded) of the key.
//
// Read-only: no lock of the store is taken. containers/storage replaces images.json by rename
// (ioutils.AtomicWriteFile), so a reader sees a whole file; one that does not parse (cut short by
// a copy, a full disk) is an error naming it, and blobs are checked against their digests.
#ifndef GPUNODE_IMAGE_STORE_CONTAINERS_STORAGE_H_
#define GPUNODE_IMAGE_STORE_CONTAINERS_STORAGE_H_

#include <memory>
#include <string>
#include <vector>

#include "src/base/host_fs.h"
#include "src/image/store_common.h"

namespace gpunode::image {

inline constexpr char kStorageConf[] = "/etc/containers/storage.conf";
inline constexpr char kStorageConfDistro[] = "/usr/share/containers/storage.conf";
inline constexpr char kGraphRoot[] = "/var/lib/containers/storage";

struct ContainersStorageOptions {
  // A host path. Empty: storage.conf's graphroot (kStorageConf, else kStorageConfDistro), else
  // kGraphRoot.
  std::string graph_root;
  // "overlay", "vfs", ... Empty: storage.conf's driver, else every <driver>-images folder there is.
  std::string driver;
  StoreOptions store;
};

// What gpunode reads of a storage.conf: [storage] driver, graphroot, rootless_storage_path (plain
// `key = "value"` lines; other keys and tables are skipped). Errors name the file and line.
struct StorageConf {
  std::string driver;
  std::string graph_root;
  std::string rootless_storage_path;
};
StatusOr<StorageConf> ParseStorageConf(absl::string_view text, absl::string_view file);

// containers/storage's file name of a big-data key ("manifest" -> "manifest",
// "sha256:ab.." -> "=c2hhMjU2OmFi..").
std::string BigDataFileName(absl::string_view key);

// One image of images.json.
struct CsImage {
  std::string id;
  std::string digest;                 // the manifest's digest
  std::vector<std::string> digests;   // every manifest digest it is known by
  std::vector<std::string> names;
  std::vector<std::string> big_data_names;
};
// Parses images.json (at most max_images entries; ids must be 64 hex, keys strings). `file` names
// it in errors.
StatusOr<std::vector<CsImage>> ParseImagesJson(absl::string_view text, absl::string_view file,
                                               size_t max_images);

// The graph root to read: options.graph_root, else storage.conf's, else kGraphRoot (root) or
// $HOME/.local/share/containers/storage (rootless: `rootless` with `home`).
StatusOr<ContainersStorageOptions> DefaultContainersStorage(const HostFs& fs, bool rootless,
                                                            const std::string& home);

std::unique_ptr<ImageStore> NewContainersStorageStore(const HostFs& fs, ContainersStorageOptions options);

}  // namespace gpunode::image

#endif  // GPUNODE_IMAGE_STORE_CONTAINERS_STORAGE_H_
