// containers-storage read from files laid out as containers/storage lays them out (images.json,
// big-data files named by makeBigDataBaseName), below a host root; the real store (podman) is in
// test/image/stores_e2e_test.sh.
#include "src/image/store_containers_storage.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "test/testing/temp_dir_test.h"

namespace gpunode::image {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BigDataFileName, AsContainersStorageNamesThem) {
  EXPECT_EQ(BigDataFileName("manifest"), "manifest");
  EXPECT_EQ(BigDataFileName("signature-1.2"), "=c2lnbmF0dXJlLTEuMg==");
  // base64("sha256:ab") = c2hhMjU2OmFi
  EXPECT_EQ(BigDataFileName("sha256:ab"), "=c2hhMjU2OmFi");
  EXPECT_EQ(BigDataFileName("Manifest"), "=TWFuaWZlc3Q=");
}

TEST(StorageConf, ReadsTheStorageTable) {
  auto c = ParseStorageConf(R"(# comment
[storage]
driver = "overlay"  # the default
graphroot = '/srv/containers'
runroot = "/run/containers/storage"
rootless_storage_path = "$HOME/.local/share/containers/storage"

[storage.options]
driver = "not this one"
)",
                            "storage.conf");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->driver, "overlay");
  EXPECT_EQ(c->graph_root, "/srv/containers");
  EXPECT_EQ(c->rootless_storage_path, "$HOME/.local/share/containers/storage");
  auto bad = ParseStorageConf("[storage]\n\ngraphroot = /var/lib\n", "/etc/containers/storage.conf");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("/etc/containers/storage.conf:3: storage.graphroot: expected a quoted string"));
  EXPECT_FALSE(ParseStorageConf("[storage]\ndriver = \"vfs\n", "f").ok());
}

TEST(ImagesJson, ParsesAndRefuses) {
  const std::string id(64, 'a');
  auto imgs = ParseImagesJson(R"([{"id":")" + id + R"(","digest":"sha256:x","names":["localhost/a:1"],"big-data-names":["manifest"],"created":"2025-01-01T00:00:00Z"}])",
                              "images.json", 10);
  ASSERT_TRUE(imgs.ok()) << imgs.status();
  ASSERT_EQ(imgs->size(), 1u);
  EXPECT_THAT((*imgs)[0].names, ElementsAre("localhost/a:1"));
  EXPECT_THAT((*imgs)[0].big_data_names, ElementsAre("manifest"));
  auto cut = ParseImagesJson(R"([{"id":")" + id + R"(","names":["loc)", "/x/overlay-images/images.json", 10);
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.status().message(), HasSubstr("/x/overlay-images/images.json"));
  EXPECT_THAT(cut.status().message(), HasSubstr("cut short"));
  EXPECT_THAT(ParseImagesJson(R"([{"id":"../../etc"}])", "f", 10).status().message(), HasSubstr("64 hex"));
  EXPECT_THAT(ParseImagesJson(R"([{"id":")" + id + R"(","names":"x"}])", "f", 10).status().message(),
              HasSubstr("names is not a list"));
  EXPECT_EQ(ParseImagesJson("[{\"id\":\"" + id + "\"},{\"id\":\"" + id + "\"}]", "f", 1).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A graph root below a host root, written as podman writes one.
class ContainersStorageTest : public gpunode::testing::TempDirTest {
 protected:
  void Write(const std::string& host_path, const std::string& data) {
    std::filesystem::path p = dir_ / host_path.substr(1);
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << data;
  }
  // Adds an image with one manifest and config; returns its manifest digest.
  std::string AddImage(const std::vector<std::string>& names, const std::string& config_json) {
    const std::string cd = Sha256Digest(config_json);
    const std::string man = nlohmann::json{{"schemaVersion", 2},
                                           {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
                                           {"config", {{"mediaType", "application/vnd.oci.image.config.v1+json"},
                                                       {"digest", cd},
                                                       {"size", config_json.size()}}},
                                           {"layers", nlohmann::json::array()}}
                                .dump();
    const std::string md = Sha256Digest(man);
    const std::string id = cd.substr(7);
    const std::string dir = root_ + "/vfs-images/" + id + "/";
    Write(dir + "manifest", man);
    Write(dir + BigDataFileName("manifest-" + md), man);
    Write(dir + BigDataFileName(cd), config_json);
    images_.push_back({{"id", id},
                       {"digest", md},
                       {"digests", {md}},
                       {"names", names},
                       {"big-data-names", {cd, "manifest-" + md, "manifest"}}});
    Write(root_ + "/vfs-images/images.json", images_.dump());
    return md;
  }
  std::unique_ptr<ImageStore> Store() {
    ContainersStorageOptions o;
    o.graph_root = root_;
    return NewContainersStorageStore(*HostFs::Open(dir_.string()), o);
  }
  const std::string root_ = "/var/lib/containers/storage";
  nlohmann::json images_ = nlohmann::json::array();
};

TEST_F(ContainersStorageTest, FindsAndListsImages) {
  const std::string md = AddImage({"localhost/cuda:12.8.1"},
                                  R"({"os":"linux","architecture":"amd64","config":{"Env":["CUDA_VERSION=12.8.1"],"Labels":{"a":"b"}}})");
  AddImage({"docker.io/library/plain:1", "docker.io/library/plain:latest"}, R"({"os":"linux","architecture":"amd64"})");
  auto store = Store();
  EXPECT_EQ(store->Name(), "containers-storage /var/lib/containers/storage");
  auto c = store->Find(*compat::ParseImageRef("localhost/cuda:12.8.1"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(EnvValue(*c, "CUDA_VERSION"), "12.8.1");
  EXPECT_EQ(c->labels.at("a"), "b");
  EXPECT_EQ(c->digest, md);
  EXPECT_EQ(c->source, "image config (containers-storage /var/lib/containers/storage)");
  EXPECT_EQ(c->source_kind, "containers-storage");
  // By digest, with and without the tag; "plain" is docker.io/library/plain:latest.
  EXPECT_TRUE(store->Find(*compat::ParseImageRef("localhost/cuda@" + md)).ok());
  EXPECT_TRUE(store->Find(*compat::ParseImageRef("localhost/cuda:12.8.1@" + md)).ok());
  EXPECT_TRUE(store->Find(*compat::ParseImageRef("plain")).ok());
  auto other = store->Find(*compat::ParseImageRef("localhost/cuda:12.8.1@sha256:" + std::string(64, 'e')));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(other.status().message(), HasSubstr("other digests: localhost/cuda:12.8.1 is " + md));
  auto missing = store->Find(*compat::ParseImageRef("localhost/nothing:1"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "containers-storage /var/lib/containers/storage: image localhost/nothing:1 not found");

  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_THAT((*list)[1].names, ElementsAre("docker.io/library/plain:1", "docker.io/library/plain:latest"));
  EXPECT_EQ((*list)[1].error, "");
  EXPECT_EQ((*list)[0].config.reference, "localhost/cuda:12.8.1");
}

TEST_F(ContainersStorageTest, ABrokenImageIsAnErrorOfItsOwnInTheList) {
  AddImage({"localhost/good:1"}, R"({"config":{}})");
  AddImage({"localhost/bad:1"}, R"({"config":{"Env":"not a list"}})");
  auto list = Store()->List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].error, "");
  EXPECT_THAT((*list)[1].error, HasSubstr("config.Env is not a list"));
  // A config file changed behind the store's back does not match its digest.
  const std::string id = images_[0]["id"];
  const std::string key = images_[0]["big-data-names"][0];
  Write(root_ + "/vfs-images/" + id + "/" + BigDataFileName(key), R"({"config":{"Env":["X=1"]}})");
  auto c = Store()->Find(*compat::ParseImageRef("localhost/good:1"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(ContainersStorageTest, GarbageImagesJsonAndNoStore) {
  AddImage({"localhost/good:1"}, R"({"config":{}})");
  Write(root_ + "/vfs-images/images.json", R"([{"id":"abc", "names": [)");
  auto c = Store()->Find(*compat::ParseImageRef("localhost/good:1"));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), HasSubstr("/var/lib/containers/storage/vfs-images/images.json"));
  EXPECT_FALSE(Store()->List().ok());

  ContainersStorageOptions o;
  o.graph_root = "/nowhere";
  auto none = NewContainersStorageStore(*HostFs::Open(dir_.string()), o)->List();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(none.status().message(), HasSubstr("containers-storage /nowhere: no such folder"));
}

TEST_F(ContainersStorageTest, DefaultsFromStorageConf) {
  auto fs = *HostFs::Open(dir_.string());
  auto o = DefaultContainersStorage(fs, false, "/root");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->graph_root, "/var/lib/containers/storage");
  Write("/usr/share/containers/storage.conf", "[storage]\ndriver = \"overlay\"\ngraphroot = \"/distro\"\n");
  EXPECT_EQ(DefaultContainersStorage(fs, false, "/root")->graph_root, "/distro");
  Write("/etc/containers/storage.conf",
        "[storage]\ndriver = \"vfs\"\ngraphroot = \"/srv/storage\"\nrootless_storage_path = \"$HOME/store\"\n");
  o = DefaultContainersStorage(fs, false, "/root");
  EXPECT_EQ(o->graph_root, "/srv/storage");
  EXPECT_EQ(o->driver, "vfs");
  EXPECT_EQ(DefaultContainersStorage(fs, true, "/home/u")->graph_root, "/home/u/store");
  Write("/home/u/.config/containers/storage.conf", "[storage]\ngraphroot = \"/home/u/mine\"\n");
  EXPECT_EQ(DefaultContainersStorage(fs, true, "/home/u")->graph_root, "/home/u/mine");
  Write("/etc/containers/storage.conf", "[storage]\ngraphroot = nope\n");
  EXPECT_THAT(DefaultContainersStorage(fs, false, "/root").status().message(),
              HasSubstr("/etc/containers/storage.conf:2"));
}

}  // namespace
}  // namespace gpunode::image
