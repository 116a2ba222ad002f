// Build-time tool: reads data/compat.yaml with the strict loader (ParseCompatData, every check of
// the run-time loader) and writes the built-in tables (builtin_tables.h) as C++. A data set that
// does not load fails the build with the loader's message (file, line, key path).
//
//   gpunode_compat_gen IN.yaml OUT.cc
//
// OUT.cc is rewritten only when its text changes.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "src/compat/builtin_emit.h"
#include "src/compat/dataset.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: gpunode_compat_gen IN.yaml OUT.cc\n";
    return 2;
  }
  const std::string in_path = argv[1], out_path = argv[2];
  std::ifstream in(in_path, std::ios::binary);
  std::ostringstream yaml;
  yaml << in.rdbuf();
  if (!in || in.bad()) {
    std::cerr << "gpunode_compat_gen: cannot read " << in_path << "\n";
    return 1;
  }
  auto data = gpunode::compat::ParseCompatData(yaml.str(), in_path);
  if (!data.ok()) {
    std::cerr << "gpunode_compat_gen: " << data.status().message() << "\n";
    return 1;
  }
  const std::string text = gpunode::compat::EmitBuiltinTables(*data, "data/compat.yaml");
  {
    std::ifstream old(out_path, std::ios::binary);
    std::ostringstream buf;
    if (old) buf << old.rdbuf();
    if (old && buf.str() == text) return 0;
  }
  const std::string tmp = out_path + ".tmp";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out || std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    std::cerr << "gpunode_compat_gen: cannot write " << out_path << "\n";
    return 1;
  }
  return 0;
}
