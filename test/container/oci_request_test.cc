// Step 1 of the OCI shim: which GPUs a container asks for, through which channel (CDI annotations,
// /dev/null volume mounts, NVIDIA_VISIBLE_DEVICES), and whether that channel is believed; and the
// two settings read from NVIDIA's config.toml. The configs are as containerd, Docker and podman
// write them (an unprivileged container's bounding set is the engine's default capabilities).
#include "src/container/oci_request.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/status_matchers.h"

namespace gpunode::container {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kGpu[] = "nvidia.com/gpu";

// The engines' default capabilities, without CAP_SYS_ADMIN.
const char* kDefaultCaps[] = {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
                              "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP",
                              "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"};

// An unprivileged container of uid 1000 with `env` after PATH.
Json Container(std::vector<std::string> env = {}) {
  Json caps = Json::array();
  for (const char* c : kDefaultCaps) caps.push_back(c);
  Json c = {{"ociVersion", "1.0.2"},
            {"process",
             {{"user", {{"uid", 1000}, {"gid", 1000}}},
              {"args", {"sh"}},
              {"env", {"PATH=/bin"}},
              {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}}}},
            {"root", {{"path", "rootfs"}}},
            {"mounts", Json::array({{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}}})}};
  for (auto& e : env) c["process"]["env"].push_back(e);
  return c;
}

Json Privileged(Json c) {
  c["process"]["capabilities"]["bounding"].push_back("CAP_SYS_ADMIN");
  return c;
}

// What the kubelet adds for the device plugin's volume-mounts strategy.
void AddDeviceMount(Json& c, const std::string& id, const std::string& source = "/dev/null") {
  c["mounts"].push_back({{"destination", std::string(kVolumeMountsRoot) + "/" + id},
                         {"type", "bind"},
                         {"source", source},
                         {"options", {"rbind", "ro"}}});
}

// As moby's daemon/nvidia_linux.go writes it: env is dockerd's environment.
void AddDockerHook(Json& c, const char* phase = "prestart") {
  c["hooks"][phase] = Json::array({{{"path", "/usr/bin/nvidia-container-runtime-hook"},
                                    {"args", {"nvidia-container-runtime-hook", "prestart"}},
                                    {"env", {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin", "LANG=C.UTF-8"}}}});
}

const RequestPolicy kDefaults;

// --- the repros of the security finding ----------------------------------------------------------

TEST(RequestedDevicesTest, AnImagesEnvAllInAnUnprivilegedContainerGetsNoGpu) {
  auto r = RequestedDevices(Container({"NVIDIA_VISIBLE_DEVICES=all"}), kGpu, kDefaults);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->Empty());
  EXPECT_EQ(r->channel, RequestChannel::kNone);
  ASSERT_THAT(r->ignored, SizeIs(1));
  EXPECT_EQ(r->ignored[0].what, "NVIDIA_VISIBLE_DEVICES=all");
  EXPECT_THAT(r->ignored[0].why, HasSubstr("unprivileged (no CAP_SYS_ADMIN in its bounding set)"));
  EXPECT_THAT(r->ignored[0].why, HasSubstr("is false (gpunode's default)"));
  EXPECT_EQ(r->ignored[0].setting, kAcceptEnvvarUnprivilegedKey);
}

TEST(RequestedDevicesTest, APodsOwnEnvAllAfterThePluginsValueGetsNoGpu) {
  // The kubelet appends the pod's env after the plugin's: the last value would win.
  auto r = RequestedDevices(Container({"NVIDIA_VISIBLE_DEVICES=GPU-1", "NVIDIA_VISIBLE_DEVICES=all"}), kGpu, kDefaults);
  ASSERT_OK(r);
  EXPECT_TRUE(r->Empty());
  ASSERT_THAT(r->ignored, SizeIs(1));
  EXPECT_EQ(r->ignored[0].what, "NVIDIA_VISIBLE_DEVICES=all");
}

TEST(RequestedDevicesTest, AnnotationAndEnvAllGiveOnlyTheAnnotationsDevices) {
  Json c = Privileged(Container({"NVIDIA_VISIBLE_DEVICES=all"}));
  c["annotations"] = {{"cdi.k8s.io/gpunode_GPU-1", "nvidia.com/gpu=GPU-1"}};
  auto r = RequestedDevices(c, kGpu, RequestPolicy{.accept_envvar_when_unprivileged = true});
  ASSERT_OK(r);
  EXPECT_THAT(r->devices, ElementsAre("nvidia.com/gpu=GPU-1"));
  EXPECT_EQ(r->channel, RequestChannel::kAnnotation);
  EXPECT_FALSE(r->capabilities.has_value());  // a CDI request gets the spec whole
  ASSERT_THAT(r->ignored, SizeIs(1));
  EXPECT_EQ(r->ignored[0].what, "NVIDIA_VISIBLE_DEVICES=all");
  EXPECT_THAT(r->ignored[0].why, HasSubstr("annotations win"));
  EXPECT_EQ(r->ignored[0].setting, "");
}

TEST(RequestedDevicesTest, EnvNamingAnotherVendorsDeviceIsRefused) {
  for (const Json& c : {Container({"NVIDIA_VISIBLE_DEVICES=example.com/nic=nic0"}),
                        Privileged(Container({"NVIDIA_VISIBLE_DEVICES=0,example.com/nic=nic0"}))}) {
    auto r = RequestedDevices(c, kGpu, kDefaults);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("\"example.com/nic=nic0\" is a device of kind example.com/nic"));
    EXPECT_THAT(r.status().message(), HasSubstr("names only nvidia.com/gpu devices"));
    EXPECT_THAT(r.status().message(), HasSubstr("NVIDIA_VISIBLE_DEVICES="));
  }
  // Its own kind by its qualified name is fine.
  auto ok = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=nvidia.com/gpu=3"})), kGpu, kDefaults);
  ASSERT_OK(ok);
  EXPECT_THAT(ok->devices, ElementsAre("nvidia.com/gpu=3"));
}

TEST(RequestedDevicesTest, TheVolumeMountMarkerIsNotAnErrorAndTheMountsAreTheRequest) {
  Json alone = Container({"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"});
  auto r = RequestedDevices(alone, kGpu, kDefaults);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->Empty());
  ASSERT_THAT(r->ignored, SizeIs(1));
  EXPECT_THAT(r->ignored[0].why, HasSubstr("the volume-mount marker, but no /dev/null mount"));

  Json c = Container({"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices/"});
  AddDeviceMount(c, "1");
  auto m = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_OK(m) << m.status();
  EXPECT_THAT(m->devices, ElementsAre("nvidia.com/gpu=1"));
  EXPECT_EQ(m->channel, RequestChannel::kVolumeMounts);
  EXPECT_THAT(m->ignored, IsEmpty());
}

// --- the three channels --------------------------------------------------------------------------

TEST(RequestedDevicesTest, APrivilegedContainersEnvIsHonoured) {
  auto r = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=0, 2,GPU-7f553f48-e049-4eda-97cf-c73c16550250,0:1"})),
                            kGpu, kDefaults);
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->devices, ElementsAre("nvidia.com/gpu=0", "nvidia.com/gpu=2",
                                      "nvidia.com/gpu=GPU-7f553f48-e049-4eda-97cf-c73c16550250", "nvidia.com/gpu=0:1"));
  EXPECT_EQ(r->channel, RequestChannel::kEnvironment);
  EXPECT_THAT(r->source, HasSubstr("NVIDIA_VISIBLE_DEVICES=0, 2"));
  EXPECT_THAT(r->source, HasSubstr("(privileged container)"));
  ASSERT_TRUE(r->capabilities.has_value());
  EXPECT_THAT(*r->capabilities, ElementsAre("compute", "utility"));
  EXPECT_THAT(r->ignored, IsEmpty());
}

TEST(RequestedDevicesTest, CapSysAdminCountsOnlyInTheBoundingSet) {
  Json c = Container({"NVIDIA_VISIBLE_DEVICES=0"});
  c["process"]["capabilities"]["effective"].push_back("CAP_SYS_ADMIN");
  EXPECT_FALSE(IsPrivilegedContainer(c));
  EXPECT_TRUE(IsPrivilegedContainer(Privileged(c)));
  // OCI specs before 1.0.0-rc5: capabilities is the list.
  Json old = Container();
  old["process"]["capabilities"] = {"CAP_KILL", "CAP_SYS_ADMIN"};
  EXPECT_TRUE(IsPrivilegedContainer(old));
  EXPECT_FALSE(IsPrivilegedContainer(Json::parse(R"({"process": {"capabilities": "CAP_SYS_ADMIN"}})")));
  EXPECT_FALSE(IsPrivilegedContainer(Json::parse(R"({"process": 3})")));
}

TEST(RequestedDevicesTest, DockersGpusHookMakesTheEnvTheEngineUsersRequest) {
  for (const char* phase : {"prestart", "createRuntime"}) {
    // An image's ENV first, then the value Docker appends for --gpus "device=1,3".
    Json c = Container({"NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_VISIBLE_DEVICES=1,3"});
    AddDockerHook(c, phase);
    auto r = RequestedDevices(c, kGpu, kDefaults);
    ASSERT_OK(r) << r.status();
    EXPECT_THAT(r->devices, ElementsAre("nvidia.com/gpu=1", "nvidia.com/gpu=3")) << phase;
    EXPECT_THAT(r->source, HasSubstr("(docker run --gpus)"));
  }
  // A hook of that name in another phase, or another hook, is not Docker's --gpus.
  Json other = Container({"NVIDIA_VISIBLE_DEVICES=all"});
  AddDockerHook(other, "poststart");
  other["hooks"]["prestart"] = Json::array({{{"path", "/usr/bin/nvidia-container-runtime-hook-not"}}});
  EXPECT_FALSE(HasDockerGpusHook(other));
  auto r = RequestedDevices(other, kGpu, kDefaults);
  ASSERT_OK(r);
  EXPECT_TRUE(r->Empty());
}

TEST(RequestedDevicesTest, TheSettingLetsUnprivilegedEnvThrough) {
  RequestPolicy nvidia{.accept_envvar_when_unprivileged = true, .envvar_source = "/etc/x/config.toml"};
  auto r = RequestedDevices(Container({"NVIDIA_VISIBLE_DEVICES=none"}), kGpu, nvidia);
  ASSERT_OK(r);
  EXPECT_TRUE(r->driver_only);
  EXPECT_THAT(r->source, HasSubstr("accept-nvidia-visible-devices-envvar-when-unprivileged = true, /etc/x/config.toml"));
}

TEST(RequestedDevicesTest, VolumeMountsGiveExactlyTheirDevices) {
  Json c = Container({"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices", "NVIDIA_DRIVER_CAPABILITIES=utility"});
  AddDeviceMount(c, "0");
  AddDeviceMount(c, "GPU-7f553f48-e049-4eda-97cf-c73c16550250");
  AddDeviceMount(c, "0:1");
  AddDeviceMount(c, "cdi/nvidia.com/gpu/3");
  AddDeviceMount(c, "cdi/nvidia.com/gpu=4");
  AddDeviceMount(c, "imex/channel0");                       // not a GPU: skipped
  AddDeviceMount(c, "0/");                                  // the same destination once
  AddDeviceMount(c, "5", "/tmp/not-dev-null");              // not /dev/null: not a request
  c["mounts"].push_back({{"destination", "/var/run/nvidia-container-devicesX/6"}, {"source", "/dev/null"}});
  c["mounts"].push_back({{"destination", "/var/run/nvidia-container-devices"}, {"source", "/dev/null"}});
  auto r = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->devices, ElementsAre("nvidia.com/gpu=0", "nvidia.com/gpu=GPU-7f553f48-e049-4eda-97cf-c73c16550250",
                                      "nvidia.com/gpu=0:1", "nvidia.com/gpu=3", "nvidia.com/gpu=4"));
  EXPECT_EQ(r->channel, RequestChannel::kVolumeMounts);
  EXPECT_THAT(r->source, HasSubstr("volume mounts /var/run/nvidia-container-devices/{0,GPU-"));
  ASSERT_TRUE(r->capabilities.has_value());
  EXPECT_THAT(*r->capabilities, ElementsAre("utility"));
}

TEST(RequestedDevicesTest, VolumeMountsWinOverTheEnvAndAnnotationsWinOverBoth) {
  Json c = Privileged(Container({"NVIDIA_VISIBLE_DEVICES=all"}));
  AddDeviceMount(c, "2");
  auto m = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_OK(m);
  EXPECT_THAT(m->devices, ElementsAre("nvidia.com/gpu=2"));
  ASSERT_THAT(m->ignored, SizeIs(1));
  EXPECT_EQ(m->ignored[0].what, "NVIDIA_VISIBLE_DEVICES=all");

  c["annotations"] = {{"cdi.k8s.io/b", "nvidia.com/gpu=6"}, {"cdi.k8s.io/a", "vendor.com/fpga=x"}};
  auto a = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_OK(a);
  EXPECT_THAT(a->devices, ElementsAre("vendor.com/fpga=x", "nvidia.com/gpu=6"));  // keys sorted; any kind
  EXPECT_EQ(a->source, "annotation cdi.k8s.io/a, cdi.k8s.io/b");
  EXPECT_THAT(a->ignored, SizeIs(2));
}

TEST(RequestedDevicesTest, VolumeMountsAreIgnoredWhenTheSettingIsOff) {
  Json c = Container({"NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices"});
  AddDeviceMount(c, "1");
  RequestPolicy off{.accept_volume_mounts = false, .volume_mounts_source = "--accept-volume-mounts"};
  auto r = RequestedDevices(c, kGpu, off);
  ASSERT_OK(r) << r.status();
  EXPECT_TRUE(r->Empty());
  ASSERT_THAT(r->ignored, SizeIs(1));
  EXPECT_EQ(r->ignored[0].what, "volume mounts /var/run/nvidia-container-devices/{1}");
  EXPECT_THAT(r->ignored[0].why, HasSubstr("accept-nvidia-visible-devices-as-volume-mounts is false (--accept-volume-mounts)"));
  EXPECT_EQ(r->ignored[0].setting, kAcceptVolumeMountsKey);

  // Off, a privileged container's variable is the request.
  Json p = Privileged(Container({"NVIDIA_VISIBLE_DEVICES=3"}));
  AddDeviceMount(p, "1");
  auto e = RequestedDevices(p, kGpu, off);
  ASSERT_OK(e);
  EXPECT_THAT(e->devices, ElementsAre("nvidia.com/gpu=3"));
}

TEST(RequestedDevicesTest, VolumeMountsNameOnlyGpus) {
  Json c = Container();
  AddDeviceMount(c, "cdi/example.com/nic/nic0");
  auto r = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("volume mount /var/run/nvidia-container-devices/cdi/example.com/nic/nic0: \"example.com/nic=nic0\" "
                        "is a device of kind example.com/nic"));
  Json bad = Container();
  AddDeviceMount(bad, "cdi/nvidia.com");
  auto b = RequestedDevices(bad, kGpu, kDefaults);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("not a CDI device (cdi/<vendor>/<class>/<name>"));
}

TEST(RequestedDevicesTest, VoidEmptyAndUnsetAskForNothing) {
  for (const char* env : {"NVIDIA_VISIBLE_DEVICES=void", "NVIDIA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=0,void",
                          "OTHER=1"}) {
    auto r = RequestedDevices(Privileged(Container({env})), kGpu, kDefaults);
    ASSERT_OK(r) << env << ": " << r.status();
    EXPECT_TRUE(r->Empty()) << env;
    EXPECT_THAT(r->ignored, IsEmpty()) << env;
  }
}

TEST(RequestedDevicesTest, TheLastEntryOfTheVariableWins) {
  // The spec-level edits append NVIDIA_VISIBLE_DEVICES=void, so an injected config asks for nothing.
  auto r = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=1", "NVIDIA_VISIBLE_DEVICES=void"})), kGpu,
                            kDefaults);
  ASSERT_OK(r);
  EXPECT_TRUE(r->Empty());
}

TEST(RequestedDevicesTest, AllNoneAndDuplicates) {
  auto r = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=all,nvidia.com/gpu=all,1,1"})), kGpu, kDefaults);
  ASSERT_OK(r) << r.status();
  EXPECT_THAT(r->devices, ElementsAre("nvidia.com/gpu=all", "nvidia.com/gpu=1"));
  auto none = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=none"})), kGpu, kDefaults);
  ASSERT_OK(none);
  EXPECT_TRUE(none->driver_only);
  EXPECT_THAT(none->devices, IsEmpty());
  EXPECT_FALSE(none->Empty());
}

TEST(RequestedDevicesTest, MalformedNamesAreRefusedWithTheirOrigin) {
  // The variable is checked even where it would not be used.
  auto bad_env = RequestedDevices(Container({"NVIDIA_VISIBLE_DEVICES=0,gpu one"}), kGpu, kDefaults);
  ASSERT_FALSE(bad_env.ok());
  EXPECT_THAT(bad_env.status().message(), HasSubstr("\"gpu one\" is not a GPU index, UUID or CDI name"));

  Json c = Container();
  c["annotations"] = {{"cdi.k8s.io/x", "nvidia.com/gpu"}};
  auto bad_annotation = RequestedDevices(c, kGpu, kDefaults);
  ASSERT_FALSE(bad_annotation.ok());
  EXPECT_THAT(bad_annotation.status().message(), HasSubstr("annotation cdi.k8s.io/x"));

  EXPECT_FALSE(RequestedDevices(Json::parse(R"({"process": {"env": "PATH=/bin"}})"), kGpu, kDefaults).ok());
  auto caps = RequestedDevices(Privileged(Container({"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=warp"})),
                               kGpu, kDefaults);
  ASSERT_FALSE(caps.ok());
  EXPECT_THAT(caps.status().message(), HasSubstr("warp"));
}

// --- NVIDIA's config file ------------------------------------------------------------------------

TEST(ToolkitConfigTest, PathIsNvidiasWithItsOverrides) {
  EXPECT_EQ(NvidiaToolkitConfigPath("", ""), "/etc/nvidia-container-runtime/config.toml");
  EXPECT_EQ(NvidiaToolkitConfigPath("", "/home/u/.config"), "/home/u/.config/nvidia-container-runtime/config.toml");
  EXPECT_EQ(NvidiaToolkitConfigPath("/x/c.toml", "/home/u/.config"), "/x/c.toml");
}

TEST(ToolkitConfigTest, TopLevelKeysAreReadAndNvidiasOtherKeysIgnored) {
  RequestPolicy p;
  ASSERT_OK(ApplyNvidiaToolkitConfig(R"(disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"
accept-nvidia-visible-devices-envvar-when-unprivileged = true
accept-nvidia-visible-devices-as-volume-mounts = false

[nvidia-container-cli]
ldconfig = "@/sbin/ldconfig"

[nvidia-container-runtime]
mode = "cdi"
accept-nvidia-visible-devices-as-volume-mounts = "not the top level"
)",
                                     "/etc/nvidia-container-runtime/config.toml", p));
  EXPECT_TRUE(p.accept_envvar_when_unprivileged);
  EXPECT_FALSE(p.accept_volume_mounts);
  EXPECT_EQ(p.envvar_source, "/etc/nvidia-container-runtime/config.toml");

  RequestPolicy untouched;
  ASSERT_OK(ApplyNvidiaToolkitConfig("# commented out\n#accept-nvidia-visible-devices-as-volume-mounts = false\n", "f",
                                     untouched));
  EXPECT_TRUE(untouched.accept_volume_mounts);
  EXPECT_FALSE(untouched.accept_envvar_when_unprivileged);
  EXPECT_EQ(untouched.volume_mounts_source, "gpunode's default");
}

TEST(ToolkitConfigTest, MalformedFilesAreRefusedNamingFileAndKey) {
  RequestPolicy p;
  Status wrong_type =
      ApplyNvidiaToolkitConfig("\n\naccept-nvidia-visible-devices-as-volume-mounts = \"yes\"\n", "/etc/c.toml", p);
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_EQ(wrong_type.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_type.message(),
              HasSubstr("/etc/c.toml:3: accept-nvidia-visible-devices-as-volume-mounts: expected a boolean (true or "
                        "false), got a string"));
  Status number = ApplyNvidiaToolkitConfig("accept-nvidia-visible-devices-envvar-when-unprivileged = 1\n", "c", p);
  EXPECT_THAT(number.message(), HasSubstr("got a number"));

  Status syntax = ApplyNvidiaToolkitConfig("accept-nvidia-visible-devices-as-volume-mounts = tru\n", "/etc/c.toml", p);
  ASSERT_FALSE(syntax.ok());
  EXPECT_THAT(syntax.message(), HasSubstr("/etc/c.toml"));
  EXPECT_THAT(syntax.message(), HasSubstr("line 1"));

  // toml++'s trap on some non-ASCII characters outside strings (see toml_edit.cc) is not reached.
  EXPECT_FALSE(ApplyNvidiaToolkitConfig("caf\xc3\xa9 = true\n", "c", p).ok());
  EXPECT_TRUE(p.accept_volume_mounts);  // nothing half-applied
}

TEST(ToolkitConfigTest, AFileIsReadWhenItExists) {
  const fs::path dir = fs::temp_directory_path() / ("gpunode-toolkit-config-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  RequestPolicy p;
  auto absent = LoadNvidiaToolkitConfig((dir / "missing.toml").string(), p);
  ASSERT_OK(absent);
  EXPECT_FALSE(*absent);
  EXPECT_TRUE(p.accept_volume_mounts);

  std::ofstream(dir / "config.toml") << "accept-nvidia-visible-devices-as-volume-mounts = false\n";
  auto good = LoadNvidiaToolkitConfig((dir / "config.toml").string(), p);
  ASSERT_OK(good);
  EXPECT_TRUE(*good);
  EXPECT_FALSE(p.accept_volume_mounts);
  EXPECT_EQ(p.volume_mounts_source, (dir / "config.toml").string());

  std::ofstream(dir / "bad.toml") << "accept-nvidia-visible-devices-as-volume-mounts = [true]\n";
  auto bad = LoadNvidiaToolkitConfig((dir / "bad.toml").string(), p);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr((dir / "bad.toml").string() + ":1: accept-nvidia"));

  fs::create_directories(dir / "a-dir.toml");
  auto unreadable = LoadNvidiaToolkitConfig((dir / "a-dir.toml").string(), p);
  ASSERT_FALSE(unreadable.ok());
  EXPECT_THAT(unreadable.status().message(), HasSubstr("a-dir.toml"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpunode::container
