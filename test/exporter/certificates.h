// Test certificates made with openssl(1): a CA, a server certificate for 127.0.0.1 and a client
// certificate, written as ca.crt, server.crt/.key and client.crt/.key into a folder.
#ifndef GPUNODE_TEST_EXPORTER_CERTIFICATES_H_
#define GPUNODE_TEST_EXPORTER_CERTIFICATES_H_

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "test/testing/run_gpunode.h"

namespace gpunode::testing {

inline void MakeCertificates(const std::filesystem::path& d) {
  const std::string cmd =
      "cd " + d.string() +
      " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca"
      " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1"
      " && printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext"
      " && openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile san.ext"
      " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=prometheus"
      " && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2";
  Result r = RunShell(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_EXPORTER_CERTIFICATES_H_
