// Test certificates made with openssl(1): a CA, and a server certificate for 127.0.0.1 signed by
// it (EC P-256 keys, valid two days). The same recipe as test/exporter's, shared here for any test
// that runs a TLS server on loopback.
#ifndef GPUNODE_TEST_TESTING_TEST_CERTS_H_
#define GPUNODE_TEST_TESTING_TEST_CERTS_H_

#include <fstream>
#include <sstream>
#include <string>

#include "test/testing/run_gpunode.h"

namespace gpunode::testing {

struct TestCert {
  std::string cert;  // PEM file
  std::string key;   // PEM file
  std::string pem;   // the certificate's text
  std::string error; // openssl's output when it failed; empty on success
};

inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A self-signed CA "<dir>/<name>.crt" with its key "<dir>/<name>.key".
inline TestCert MakeTestCa(const std::string& dir, const std::string& name) {
  TestCert c{dir + "/" + name + ".crt", dir + "/" + name + ".key", "", ""};
  Result r = RunShell("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=" +
                      name + " -keyout " + c.key + " -out " + c.cert);
  if (r.exit_code != 0) c.error = r.out;
  c.pem = ReadTextFile(c.cert);
  return c;
}

// A server certificate "<dir>/<name>.crt" for IP 127.0.0.1 (subjectAltName), signed by `ca`.
inline TestCert MakeServerCert(const TestCert& ca, const std::string& dir, const std::string& name) {
  TestCert c{dir + "/" + name + ".crt", dir + "/" + name + ".key", "", ""};
  const std::string csr = dir + "/" + name + ".csr";
  const std::string ext = dir + "/" + name + ".ext";
  Result r = RunShell("printf 'subjectAltName=IP:127.0.0.1\\n' > " + ext +
                      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 -keyout " +
                      c.key + " -out " + csr + " && openssl x509 -req -in " + csr + " -CA " + ca.cert + " -CAkey " + ca.key +
                      " -CAcreateserial -days 2 -extfile " + ext + " -out " + c.cert);
  if (r.exit_code != 0) c.error = r.out;
  c.pem = ReadTextFile(c.cert);
  return c;
}

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_TEST_CERTS_H_
