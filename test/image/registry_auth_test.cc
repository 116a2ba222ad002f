#include "src/image/registry_auth.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpunode::image {
namespace {

using ::testing::HasSubstr;

TEST(WwwAuthenticate, DockerHubBearerChallenge) {
  // The header Docker Hub's registry-1.docker.io sends for an anonymous manifest request.
  auto c = ParseWwwAuthenticate(
      R"(Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/ubuntu:pull")");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 1u);
  EXPECT_EQ((*c)[0].scheme, "bearer");
  EXPECT_EQ((*c)[0].params.at("realm"), "https://auth.docker.io/token");
  EXPECT_EQ((*c)[0].params.at("service"), "registry.docker.io");
  EXPECT_EQ((*c)[0].params.at("scope"), "repository:library/ubuntu:pull");
}

TEST(WwwAuthenticate, SeveralChallengesTokensAndEscapes) {
  auto c = ParseWwwAuthenticate(R"(Basic realm="Registry Realm", BEARER Realm=https://t.example/token, error="a \"b\"")");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 2u);
  EXPECT_EQ((*c)[0].scheme, "basic");
  EXPECT_EQ((*c)[0].params.at("realm"), "Registry Realm");
  EXPECT_EQ((*c)[1].scheme, "bearer");
  EXPECT_EQ((*c)[1].params.at("realm"), "https://t.example/token");
  EXPECT_EQ((*c)[1].params.at("error"), "a \"b\"");
}

TEST(WwwAuthenticate, SyntaxErrorsAreNamed) {
  auto c = ParseWwwAuthenticate(R"(Bearer realm="https://x)");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("unclosed quoted string"));
  c = ParseWwwAuthenticate("realm=x");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("before any scheme"));
  EXPECT_FALSE(ParseWwwAuthenticate("").ok());
  EXPECT_FALSE(ParseWwwAuthenticate(std::string(20000, 'a')).ok());
}

TEST(UserPassword, PasswordMayHoldColons) {
  auto c = ParseUserPassword("alice:pa:ss\n", "--registry-auth");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->username, "alice");
  EXPECT_EQ(c->password, "pa:ss");
  EXPECT_EQ(c->source, "--registry-auth");
  auto bad = ParseUserPassword("alice", "--registry-auth");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--registry-auth: not USER:PASSWORD"));
  EXPECT_FALSE(ParseUserPassword(":x", "f").ok());
}

std::string Auth(const std::string& up) { return absl::Base64Escape(up); }

TEST(DockerConfig, AuthsEntryForTheHost) {
  const std::string json = R"({"auths":{"registry.example:5000":{"auth":")" + Auth("bob:secret") +
                           R"("},"https://index.docker.io/v1/":{"auth":")" + Auth("hub:token") + R"("}}})";
  auto c = CredentialFromDockerConfig(json, "registry.example:5000", "/home/u/.docker/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->username, "bob");
  EXPECT_EQ((*c)->password, "secret");
  EXPECT_EQ((*c)->source, "/home/u/.docker/config.json (auths \"registry.example:5000\")");
  // Docker Hub's key (https://index.docker.io/v1/) serves docker.io references.
  c = CredentialFromDockerConfig(json, "docker.io", "cfg");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->username, "hub");
  // Another host: nothing.
  c = CredentialFromDockerConfig(json, "nvcr.io", "cfg");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

TEST(DockerConfig, SchemeAndPathInKeysAndIdentityToken) {
  const std::string json = R"({"auths":{"https://Reg.Example/v2/":{"identitytoken":"refresh-123"}}})";
  auto c = CredentialFromDockerConfig(json, "reg.example", "cfg");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->identity_token, "refresh-123");
  EXPECT_FALSE((*c)->HasBasic());
}

TEST(DockerConfig, KubernetesDockerConfigJson) {
  // The `.dockerconfigjson` of a kubernetes.io/dockerconfigjson Secret has the same shape.
  const std::string json = R"({"auths":{"nvcr.io":{"username":"$oauthtoken","password":"nvapi-x","auth":")" +
                           Auth("$oauthtoken:nvapi-x") + R"("}}})";
  auto c = CredentialFromDockerConfig(json, "nvcr.io", "secret default/ngc");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->username, "$oauthtoken");
  EXPECT_EQ((*c)->password, "nvapi-x");
}

TEST(DockerConfig, CredentialHelpersAreNotSupportedAndSaySo) {
  auto c = CredentialFromDockerConfig(R"({"credHelpers":{"nvcr.io":"ecr-login"}})", "nvcr.io", "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("docker-credential-ecr-login"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("not supported"));
  // A helper for another host does not matter.
  EXPECT_TRUE(CredentialFromDockerConfig(R"({"credHelpers":{"gcr.io":"gcloud"}})", "nvcr.io", "cfg").ok());
  // credsStore with the "{}" marks it writes: no credential, and a note for the error message.
  std::string note;
  c = CredentialFromDockerConfig(R"({"auths":{"nvcr.io":{}},"credsStore":"desktop"})", "nvcr.io", "cfg", &note);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->has_value());
  EXPECT_THAT(note, HasSubstr("docker-credential-desktop"));
  EXPECT_THAT(note, HasSubstr("not supported"));
}

TEST(DockerConfig, BadInputIsNamed) {
  auto c = CredentialFromDockerConfig(R"({"auths":{"h":{"auth":"!!"}}})", "h", "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("cfg (auths \"h\"): auth is not base64"));
  c = CredentialFromDockerConfig(R"({"auths":[]})", "h", "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("auths is not an object"));
  c = CredentialFromDockerConfig("{", "h", "cfg");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("not valid JSON"));
  c = CredentialFromDockerConfig(std::string(kMaxDockerConfigBytes + 1, ' '), "h", "cfg");
  ASSERT_FALSE(c.ok());
}

}  // namespace
}  // namespace gpunode::image
