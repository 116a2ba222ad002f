// NVIDIA's flags and variables on `gpunode plugin`, `labels` and `exporter` (the real binary, a
// simulated node): every one is accepted with NVIDIA's spelling, booleans bare or =true|false as
// Go reads them, each setting gpunode ignores noted exactly once, bad values and unknown flags
// refused with exit 3. Sources: NVIDIA/k8s-device-plugin v0.19.0 (cmd/nvidia-device-plugin,
// cmd/gpu-feature-discovery), NVIDIA/dcgm-exporter 4.5.3-4.8.2 (pkg/cmd/app.go); the table is
// docs/nvidia-flags.md.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace gpunode {
namespace {

using ::gpunode::testing::Result;
using ::gpunode::testing::RunGpunode;
using ::testing::HasSubstr;
using ::testing::Not;

int Notes(const std::string& out) {
  int n = 0;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) n += line.find("does not apply") != std::string::npos;
  return n;
}

// One setting: its flags as typed, its variables, and whether gpunode ignores it (noted once).
struct Setting {
  std::string flag;                // "--fake-gpus" or "-x 5000"
  std::vector<std::string> env;    // NVIDIA's variables, with a value: "NAME=VALUE"
  bool noted;
};

// The settings that do not apply, each given once by flag and once by each of its variables.
void ExpectEveryNoteOnce(const std::string& command, const std::vector<Setting>& settings) {
  std::string flags;
  int noted = 0;
  for (const Setting& s : settings) {
    flags += " " + s.flag;
    noted += s.noted;
  }
  Result r = RunGpunode(command + flags);
  EXPECT_EQ(r.exit_code, 0) << command << flags << "\n" << r.out;
  EXPECT_EQ(Notes(r.out), noted) << r.out;
  for (const Setting& s : settings) {
    for (const std::string& kv : s.env) {
      const size_t eq = kv.find('=');
      Result e = RunGpunode(command + "", {{kv.substr(0, eq), kv.substr(eq + 1)}});
      EXPECT_EQ(e.exit_code, 0) << kv << "\n" << e.out;
      EXPECT_EQ(Notes(e.out), s.noted ? 1 : 0) << kv << "\n" << e.out;
      if (s.noted) {
        EXPECT_THAT(e.out, HasSubstr(kv.substr(0, eq) + "=\"")) << e.out;
      }
    }
  }
}

TEST(NvidiaFlagsCliTest, EveryDcgmExporterFlagAndVariableIsAccepted) {
  ExpectEveryNoteOnce(
      "--simulate dgx-h200 exporter --once -c 100",
      {
          {"-k", {"DCGM_EXPORTER_KUBERNETES=true"}, false},
          {"-n", {"DCGM_EXPORTER_NO_HOSTNAME=1"}, false},
          {"--log-format text", {"DCGM_EXPORTER_LOG_FORMAT=text"}, false},
          {"--kubernetes-gpu-id-type device-name", {"DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE=uid"}, false},
          {"-d f", {"DCGM_EXPORTER_DEVICES_STR=g"}, false},
          {"-o", {"DCGM_EXPORTER_USE_OLD_NAMESPACE=true"}, true},
          {"-p g", {"DCGM_EXPORTER_CPU_DEVICES_STR=f"}, true},
          {"-s f", {"DCGM_EXPORTER_OTHER_DEVICES_STR=f"}, true},
          {"-m default:metrics", {"DCGM_EXPORTER_CONFIGMAP_DATA=default:metrics"}, true},
          {"-r localhost:5555", {"DCGM_REMOTE_HOSTENGINE_INFO=localhost:5555"}, true},
          {"--kubernetes-enable-pod-labels", {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS=true"}, false},
          {"--kubernetes-enable-pod-uid", {"DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID=T"}, false},
          {"--kubernetes-pod-label-allowlist-regex a.* --kubernetes-pod-label-allowlist-regex b",
           {"DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX=a.*,b"}, false},
          {"--fake-gpus", {"DCGM_EXPORTER_USE_FAKE_GPUS=true"}, true},
          {"-x 5000", {"DCGM_EXPORTER_XID_COUNT_WINDOW_SIZE=5000"}, true},
          {"--rbmn", {"DCGM_EXPORTER_REPLACE_BLANKS_IN_MODEL_NAME=true"}, true},
          {"--debug", {"DCGM_EXPORTER_DEBUG=true"}, true},
          {"--clock-events-count-window-size 1000", {"DCGM_EXPORTER_CLOCK_EVENTS_COUNT_WINDOW_SIZE=1000"}, true},
          {"--enable-dcgm-log", {"DCGM_EXPORTER_ENABLE_DCGM_LOG=true"}, true},
          {"--dcgm-log-level ERROR", {"DCGM_EXPORTER_DCGM_LOG_LEVEL=ERROR"}, true},
          {"--hpc-job-mapping-dir /run/jobs", {"DCGM_HPC_JOB_MAPPING_DIR=/run/jobs"}, true},
          {"--kubernetes-virtual-gpus", {"KUBERNETES_VIRTUAL_GPUS=true"}, true},
          {"--dump-enabled", {"DCGM_EXPORTER_DUMP_ENABLED=true"}, true},
          {"--dump-directory /tmp/d", {"DCGM_EXPORTER_DUMP_DIRECTORY=/tmp/d"}, true},
          {"--dump-retention 24", {"DCGM_EXPORTER_DUMP_RETENTION=24"}, true},
          {"--dump-compression", {"DCGM_EXPORTER_DUMP_COMPRESSION=true"}, true},
          {"--kubernetes-enable-dra", {"KUBERNETES_ENABLE_DRA=true"}, false},
          {"--disable-startup-validate", {"DISABLE_STARTUP_VALIDATE=true"}, true},
          {"--enable-gpu-bind-unbind-watch", {"DCGM_EXPORTER_ENABLE_GPU_BIND_UNBIND_WATCH=true"}, true},
          {"--gpu-bind-unbind-poll-interval 1s", {"DCGM_EXPORTER_GPU_BIND_UNBIND_POLL_INTERVAL=1s"}, true},
          {"--enable-pprof", {"DCGM_EXPORTER_ENABLE_PPROF=true"}, true},
          {"--web-systemd-socket", {"DCGM_EXPORTER_SYSTEMD_SOCKET=true"}, true},
      });
}

TEST(NvidiaFlagsCliTest, EveryDevicePluginFlagAndVariableIsAccepted) {
  ExpectEveryNoteOnce(
      "--simulate dgx-h200 plugin --print",
      {
          {"--nvidia-driver-root=/run/nvidia/driver", {"NVIDIA_DRIVER_ROOT=/run/nvidia/driver"}, false},
          {"--driver-root /", {}, false},
          {"--dev-root /", {"NVIDIA_DEV_ROOT=/"}, false},
          {"--nvidia-dev-root /", {}, false},
          {"--cdi-annotation-prefix cdi.k8s.io/", {"CDI_ANNOTATION_PREFIX=cdi.k8s.io/"}, false},
          {"--mps-root /run/nvidia/mps", {"MPS_ROOT=/run/nvidia/mps"}, false},
          {"--device-discovery-strategy auto", {"DEVICE_DISCOVERY_STRATEGY=nvml"}, false},
          {"--gdrcopy-enabled", {"GDRCOPY_ENABLED=true"}, true},
          {"--gds-enabled", {"GDS_ENABLED=true"}, true},
          {"--mofed-enabled", {"MOFED_ENABLED=true"}, true},
          {"--nvidia-cdi-hook-path /usr/bin/nvidia-cdi-hook",
           {"NVIDIA_CDI_HOOK_PATH=/usr/bin/nvidia-cdi-hook", "NVIDIA_CTK_PATH=/usr/bin/nvidia-ctk"}, true},
          {"--driver-root-ctr-path /driver-root", {"DRIVER_ROOT_CTR_PATH=/driver-root", "CONTAINER_DRIVER_ROOT=/d"},
           true},
          {"--imex-channel-ids 0 --imex-channel-ids 1", {"IMEX_CHANNEL_IDS=0,1"}, true},
          {"--imex-required", {"IMEX_REQUIRED=true"}, true},
          {"--cdi-feature-flags a,b", {"CDI_FEATURE_FLAGS=a"}, true},
          {"--device-list-strategy envvar --device-list-strategy volume-mounts", {}, false},
          {"--pass-device-specs --fail-on-init-error=false", {}, false},
      });
}

TEST(NvidiaFlagsCliTest, EveryGfdFlagAndVariableIsAccepted) {
  ExpectEveryNoteOnce(
      "--simulate dgx-h200 labels --print --no-timestamp",
      {
          {"--fail-on-init-error", {"GFD_FAIL_ON_INIT_ERROR=true", "FAIL_ON_INIT_ERROR=true"}, false},
          {"--device-discovery-strategy nvml", {"DEVICE_DISCOVERY_STRATEGY=auto"}, false},
          {"--use-node-feature-api", {"GFD_USE_NODE_FEATURE_API=true", "USE_NODE_FEATURE_API=true"}, true},
          {"--container-driver-root /driver-root", {"DRIVER_ROOT_CTR_PATH=/x", "CONTAINER_DRIVER_ROOT=/x"}, true},
          {"--namespace gpu-operator", {"NAMESPACE=gpu-operator"}, true},
          {"--pod-name gfd-x7k2p", {"POD_NAME=gfd-x7k2p"}, true},
          {"--kube-api-qps 5", {"KUBE_API_QPS=5.5"}, true},
          {"--kube-api-burst 10", {"KUBE_API_BURST=10"}, true},
          {"--mig-strategy none --sleep-interval 30s --machine-type-file /sys/class/dmi/id/product_name", {}, false},
          {"--oneshot --node-name n1", {"GFD_ONESHOT=true", "NODE_NAME=n1", "GFD_MIG_STRATEGY=none"}, false},
      });
}

TEST(NvidiaFlagsCliTest, BooleansAreBareOrTakeGoValuesAndFalseAsksForNothing) {
  // false asks for nothing gpunode would have to do: no note.
  Result off = RunGpunode(
      "--simulate dgx-h200 exporter --once --fake-gpus=false --debug=0 --dump-enabled=F --rbmn=FALSE");
  EXPECT_EQ(off.exit_code, 0) << off.out;
  EXPECT_EQ(Notes(off.out), 0) << off.out;
  Result on = RunGpunode("--simulate dgx-h200 exporter --once --fake-gpus=t --debug=True");
  EXPECT_EQ(Notes(on.out), 2) << on.out;
  EXPECT_THAT(on.out, HasSubstr("--fake-gpus=t does not apply: "));
  // GFD's booleans: --no-timestamp=false keeps the timestamp, bare drops it.
  Result ts = RunGpunode("--simulate dgx-h200 labels --print --no-timestamp=false");
  EXPECT_EQ(ts.exit_code, 0) << ts.out;
  EXPECT_THAT(ts.out, HasSubstr("nvidia.com/gfd.timestamp="));
  Result nots = RunGpunode("--simulate dgx-h200 labels --print --no-timestamp");
  EXPECT_THAT(nots.out, Not(HasSubstr("nvidia.com/gfd.timestamp=")));
  // A value Go would refuse is refused, naming the flag or variable as typed.
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"exporter --once --fake-gpus=maybe", "--fake-gpus=maybe: not a boolean"},
           {"exporter --once -k=yes", "not expected: -=yes"},  // Go's -k=yes; see docs: short forms take no =VALUE
           {"exporter --once --kubernetes=yes", "--kubernetes=yes: not a boolean"},
           {"exporter --once -x soon", "--xid-count-window-size=soon: not an integer"},
           {"exporter --once --log-format xml", "want text or json"},
           {"exporter --once --kubernetes-gpu-id-type serial", "want uid or device-name"},
           {"plugin --print --gds-enabled=2", "--gds-enabled=2: not a boolean"},
           {"plugin --print --device-discovery-strategy=magic", "want auto, nvml or tegra"},
           {"plugin --print --cdi-annotation-prefix=nope", "must end with '/'"},
           {"labels --print --oneshot=sometimes", "--oneshot=sometimes: not a boolean"},
           {"labels --print --kube-api-qps=fast", "not a number"},
           {"labels --print --device-discovery-strategy=pci", "want auto, nvml, tegra or vfio"},
       }) {
    Result r = RunGpunode("--simulate dgx-h200 " + args);
    EXPECT_EQ(r.exit_code, 3) << args << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr(want)) << args;
  }
  Result env = RunGpunode("--simulate dgx-h200 plugin --print", {{"IMEX_REQUIRED", "yes"}});
  EXPECT_EQ(env.exit_code, 3);
  EXPECT_THAT(env.out, HasSubstr("IMEX_REQUIRED=\"yes\": not a boolean"));
}

TEST(NvidiaFlagsCliTest, UnknownFlagsStillFailWithAClearError) {
  for (const std::string cmd : {"exporter --once", "plugin --print", "labels --print"}) {
    Result r = RunGpunode("--simulate dgx-h200 " + cmd + " --nvidia-bogus-flag");
    EXPECT_EQ(r.exit_code, 3) << cmd << "\n" << r.out;
    EXPECT_THAT(r.out, HasSubstr("unknown arguments: --nvidia-bogus-flag")) << cmd;
  }
}

TEST(NvidiaFlagsCliTest, TegraDiscoveryAndDeviceListsAreNotedByValue) {
  Result t = RunGpunode("--simulate dgx-h200 plugin --print --device-discovery-strategy tegra");
  EXPECT_EQ(t.exit_code, 0) << t.out;
  EXPECT_THAT(t.out, HasSubstr("--device-discovery-strategy=tegra does not apply"));
  Result d = RunGpunode("--simulate dgx-h200 exporter --once -d g:0,1");
  EXPECT_EQ(d.exit_code, 0) << d.out;
  EXPECT_THAT(d.out, HasSubstr("--devices=g:0,1 does not apply"));
  // dcgm-exporter's -rbmn reaches CLI11 as -r bmn: noted as what it is.
  Result rbmn = RunGpunode("--simulate dgx-h200 exporter --once -rbmn");
  EXPECT_EQ(rbmn.exit_code, 0) << rbmn.out;
  EXPECT_THAT(rbmn.out, HasSubstr("-rbmn (--replace-blanks-in-model-name) does not apply"));
}

TEST(NvidiaFlagsCliTest, WiredSettingsChangeWhatGpunodeDoes) {
  // --device-list-strategy repeated as urfave's StringSlice; --pass-device-specs bare.
  Result p = RunGpunode(
      "--simulate dgx-h200 plugin --print -o json --device-list-strategy envvar --device-list-strategy "
      "cdi-annotations --pass-device-specs 2>/dev/null");
  ASSERT_EQ(p.exit_code, 0) << p.out;
  EXPECT_THAT(p.out, HasSubstr("\"deviceListStrategy\": \"envvar,cdi-annotations\""));
  EXPECT_THAT(p.out, HasSubstr("\"passDeviceSpecs\": true"));
  // --log-format json: the notes (and every log line) as JSON objects.
  Result j = RunGpunode("--simulate dgx-h200 exporter --once --log-format json --fake-gpus");
  EXPECT_EQ(j.exit_code, 0) << j.out;
  EXPECT_THAT(j.out, HasSubstr("\"level\":\"warning\",\"component\":\"exporter\",\"msg\":\"--fake-gpus=true does not apply"));
  // -n / DCGM_EXPORTER_NO_HOSTNAME=false as Go booleans.
  Result n = RunGpunode("--simulate dgx-h200 exporter --once 2>/dev/null", {{"DCGM_EXPORTER_NO_HOSTNAME", "t"}});
  EXPECT_THAT(n.out, Not(HasSubstr("Hostname=")));
  Result keep = RunGpunode("--simulate dgx-h200 exporter --once -n=false 2>/dev/null");
  EXPECT_NE(keep.exit_code, 0) << "CLI11 takes no =VALUE on a short flag (documented)";
  Result keep_long = RunGpunode("--simulate dgx-h200 exporter --once --no-hostname=false 2>/dev/null");
  EXPECT_THAT(keep_long.out, HasSubstr("Hostname="));
}

}  // namespace
}  // namespace gpunode
