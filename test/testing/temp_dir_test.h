// A GoogleTest fixture that gives each test a fresh temporary directory, removed afterwards.
#ifndef GPUNODE_TEST_TESTING_TEMP_DIR_TEST_H_
#define GPUNODE_TEST_TESTING_TEMP_DIR_TEST_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gpunode::testing {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("gpunode-" + std::string(info->test_suite_name()) + "-" + info->name() + "-" +
            std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // `name` below the directory.
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // The contents of `name` below the directory ("" when missing).
  std::string Read(const std::string& name) const {
    std::ifstream in(Path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::filesystem::path dir_;
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_TEMP_DIR_TEST_H_
