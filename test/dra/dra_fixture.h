// A kubelet plugin of a DRA driver against the kubelet's DRA emulator, in a fresh temp folder
// (short: a Unix socket path has at most 107 bytes): <dir>/registry (the plugin registry the
// emulator watches) and <dir>/plugins (where the node service's folder goes).
#ifndef GPUNODE_TEST_DRA_DRA_FIXTURE_H_
#define GPUNODE_TEST_DRA_DRA_FIXTURE_H_

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "src/dra/registration.h"
#include "test/dra/test_preparer.h"
#include "test/testing/kubelet_dra_emulator.h"

namespace gpunode::dra {

inline constexpr char kDriver[] = "gpu.nvidia.com";

class DraTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("gpn-dra-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "plugins");
    options_.driver_name = kDriver;
    options_.registrar_dir = (dir_ / "registry").string();
    options_.plugins_dir = (dir_ / "plugins").string();
    options_.watch_interval = std::chrono::milliseconds(200);
  }
  void TearDown() override {
    StopPlugin();
    if (kubelet_) kubelet_->Stop();
    std::filesystem::remove_all(dir_);
  }

  bool StartKubelet(std::vector<std::string> services = {testing::KubeletDraEmulator::kV1,
                                                         testing::KubeletDraEmulator::kV1Beta1}) {
    kubelet_ = std::make_unique<testing::KubeletDraEmulator>(options_.registrar_dir, std::move(services));
    return kubelet_->Start();
  }
  // Runs the plugin on a thread; its Run's status lands in run_status_.
  void StartPlugin() {
    plugin_ = std::make_unique<KubeletPlugin>(options_, &preparer_, [this](const std::string& line) {
      std::lock_guard<std::mutex> l(log_mu_);
      log_.push_back(line);
    });
    stop_ = false;
    runner_ = std::thread([this] { run_status_ = plugin_->Run(stop_); });
  }
  void StopPlugin() {
    if (!plugin_) return;
    stop_ = true;
    plugin_->Interrupt();
    if (runner_.joinable()) runner_.join();
    plugin_.reset();
  }
  std::string Log() {
    std::lock_guard<std::mutex> l(log_mu_);
    std::string out;
    for (const auto& line : log_) out += line + "\n";
    return out;
  }
  std::string RegSocket() const { return options_.registrar_dir + "/" + kDriver + "-reg.sock"; }
  std::string Endpoint() const { return options_.plugins_dir + "/" + kDriver + "/dra.sock"; }

  std::filesystem::path dir_;
  KubeletPluginOptions options_;
  TestPreparer preparer_;
  std::unique_ptr<testing::KubeletDraEmulator> kubelet_;
  std::unique_ptr<KubeletPlugin> plugin_;
  std::atomic<bool> stop_{false};
  std::thread runner_;
  Status run_status_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

}  // namespace gpunode::dra

#endif  // GPUNODE_TEST_DRA_DRA_FIXTURE_H_
