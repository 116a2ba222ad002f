#include "src/image/store_docker.h"

#include <httplib.h>
#include <sys/socket.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "src/base/json.h"

namespace gpunode::image {

namespace {

constexpr absl::string_view kSource = "image config (docker)";

// The repository part of a RepoDigests entry ("ubuntu@sha256:..." -> "docker.io/library/ubuntu").
std::string DigestRepository(absl::string_view entry) {
  size_t at = entry.find('@');
  if (at == absl::string_view::npos) return "";
  return RepositoryOf(entry.substr(0, at));
}

class DockerStore : public ImageStore {
 public:
  DockerStore(HostFs fs, DockerOptions o) : fs_(std::move(fs)), o_(std::move(o)) {
    name_ = absl::StrCat("docker ", o_.socket);
  }

  std::string Name() const override { return name_; }
  std::string Kind() const override { return "docker"; }

  StatusOr<ImageConfig> Find(const compat::ImageRef& ref) override {
    std::vector<std::string> mismatched;
    for (const std::string& name : CandidateNames(ref)) {
      if (!ref.digest.empty() && !ref.tag.empty() && !ref.tag_defaulted && absl::StrContains(name, "@") &&
          absl::StrContains(name, ":" + ref.tag + "@")) {
        continue;  // Docker takes a reference with both only as "repo@digest"
      }
      const std::string where = absl::StrCat(name_, ": image ", name);
      GPUNODE_ASSIGN_OR_RETURN(Answer a, Get(absl::StrCat("/images/", name, "/json"), kMaxDockerInspectBytes, where));
      if (a.status == 404) continue;
      GPUNODE_RETURN_IF_ERROR(Ok(a, where));
      GPUNODE_ASSIGN_OR_RETURN(ImageConfig c, ConfigFromDockerInspect(a.body, ref.Name(), where));
      if (!ref.digest.empty() && !absl::StrContains(name, "@") && c.digest != ref.digest) {
        mismatched.push_back(absl::StrCat(name, " is ", c.digest.empty() ? "of no registry digest" : c.digest));
        continue;
      }
      c.reference = name;
      return c;
    }
    std::string msg = absl::StrCat(name_, ": image ", absl::StrJoin(CandidateNames(ref), " or "), " not found");
    if (!mismatched.empty()) absl::StrAppend(&msg, " (", absl::StrJoin(mismatched, "; "), ")");
    return absl::NotFoundError(msg);
  }

  StatusOr<std::vector<StoredImage>> List() override {
    const std::string where = absl::StrCat(name_, ": /images/json");
    GPUNODE_ASSIGN_OR_RETURN(Answer a, Get("/images/json", kMaxDockerListBytes, where));
    GPUNODE_RETURN_IF_ERROR(Ok(a, where));
    GPUNODE_ASSIGN_OR_RETURN(nlohmann::json list, ParseJson(a.body, where));
    if (!list.is_array()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a list"));
    if (list.size() > o_.store.max_images) {
      return absl::ResourceExhaustedError(absl::StrCat(name_, ": ", list.size(), " images, more than the ",
                                                 o_.store.max_images, " gpunode lists"));
    }
    std::vector<StoredImage> out;
    for (const nlohmann::json& e : list) {
      StoredImage si;
      if (!e.is_object() || !e.contains("Id") || !e["Id"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": an entry without an Id"));
      }
      si.id = e["Id"].get<std::string>();
      GPUNODE_RETURN_IF_ERROR(CheckDigest(si.id, absl::StrCat(where, ": Id")));
      for (const char* key : {"RepoTags", "RepoDigests"}) {
        auto it = e.find(key);
        if (it == e.end() || !it->is_array()) continue;
        for (const auto& n : *it) {
          if (n.is_string() && n.get<std::string>() != "<none>:<none>" && n.get<std::string>() != "<none>@<none>") {
            si.names.push_back(n.get<std::string>());
          }
        }
      }
      const std::string iwhere = absl::StrCat(name_, ": image ", si.id);
      auto inspected = Get(absl::StrCat("/images/", si.id, "/json"), kMaxDockerInspectBytes, iwhere);
      if (!inspected.ok()) return inspected.status();
      Status ok = Ok(*inspected, iwhere);
      auto c = ok.ok() ? ConfigFromDockerInspect(inspected->body, "", iwhere) : StatusOr<ImageConfig>(ok);
      if (c.ok()) {
        si.config = std::move(*c);
        si.config.reference = si.names.empty() ? si.id : si.names.front();
      } else {
        si.error = std::string(c.status().message());
      }
      out.push_back(std::move(si));
    }
    return out;
  }

 private:
  struct Answer {
    int status = 0;
    std::string body;
  };

  Status Ok(const Answer& a, absl::string_view where) const {
    if (a.status == 200) return absl::OkStatus();
    std::string msg = a.body.substr(0, 300);
    if (auto j = ParseJson(a.body, where); j.ok() && j->is_object() && j->contains("message") &&
                                           (*j)["message"].is_string()) {
      msg = (*j)["message"].get<std::string>().substr(0, 300);
    }
    const absl::StatusCode code = a.status == 404 ? absl::StatusCode::kNotFound : absl::StatusCode::kUnknown;
    return Status(code, absl::StrCat(where, ": HTTP ", a.status, ": ", msg));
  }

  // One GET on the socket: the status and the body (at most `max_bytes`), in at most the timeout
  // per read and four times it in all.
  StatusOr<Answer> Get(const std::string& path, size_t max_bytes, absl::string_view where) {
    GPUNODE_ASSIGN_OR_RETURN(std::string local, fs_.LocalPath(o_.socket));
    GPUNODE_RETURN_IF_ERROR(CheckUnixSocket(local, name_));
    httplib::Client client(local);
    client.set_address_family(AF_UNIX);
    const auto timeout = absl::ToChronoMilliseconds(o_.store.timeout);
    client.set_connection_timeout(timeout);
    client.set_read_timeout(timeout);
    client.set_write_timeout(timeout);
    client.set_keep_alive(false);
    const absl::Time deadline = absl::Now() + 4 * o_.store.timeout;
    Answer a;
    bool too_big = false, too_slow = false;
    httplib::Headers headers = {{"Host", "docker"}, {"User-Agent", "gpunode"}, {"Accept", "application/json"}};
    auto res = client.Get(
        path, headers,
        [&](const httplib::Response& r) {
          a.status = r.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (a.body.size() + n > max_bytes) {
            too_big = true;
            return false;
          }
          if (absl::Now() > deadline) {
            too_slow = true;
            return false;
          }
          a.body.append(data, n);
          return true;
        });
    if (too_big) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": the answer is larger than the ", max_bytes,
                                               " bytes gpunode reads"));
    }
    if (too_slow) {
      return absl::DeadlineExceededError(absl::StrCat(where, ": the answer took longer than ",
                                                absl::FormatDuration(4 * o_.store.timeout)));
    }
    if (!res) {
      const httplib::Error e = res.error();
      if (e == httplib::Error::Read || e == httplib::Error::ConnectionTimeout) {
        return absl::DeadlineExceededError(absl::StrCat(where, ": no answer within ",
                                                  absl::FormatDuration(o_.store.timeout), " (",
                                                  httplib::to_string(e), ")"));
      }
      return absl::UnavailableError(absl::StrCat(where, ": ", httplib::to_string(e)));
    }
    a.status = res->status;
    return a;
  }

  HostFs fs_;
  DockerOptions o_;
  std::string name_;
};

}  // namespace

StatusOr<ImageConfig> ConfigFromDockerInspect(absl::string_view body, absl::string_view repository,
                                              absl::string_view where) {
  GPUNODE_ASSIGN_OR_RETURN(nlohmann::json j, ParseJson(body, where));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": the answer is not an object"));
  // The config blob's shape, from the inspect answer's fields, through the one bounded parser.
  nlohmann::json doc = nlohmann::json::object();
  for (const auto& [from, to] : {std::pair{"Os", "os"}, {"Architecture", "architecture"}, {"Variant", "variant"}}) {
    if (auto it = j.find(from); it != j.end()) doc[to] = *it;
  }
  if (auto it = j.find("Config"); it != j.end() && it->is_object()) {
    nlohmann::json cfg = nlohmann::json::object();
    for (const char* k : {"Env", "Labels"}) {
      if (auto f = it->find(k); f != it->end()) cfg[k] = *f;
    }
    doc["config"] = std::move(cfg);
  } else if (it != j.end() && !it->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": Config is not an object"));
  }
  GPUNODE_ASSIGN_OR_RETURN(ImageConfig c, ParseImageConfig(doc.dump(), where));
  if (auto id = j.find("Id"); id != j.end() && id->is_string()) c.config_digest = id->get<std::string>();
  if (auto rd = j.find("RepoDigests"); rd != j.end() && rd->is_array()) {
    for (const auto& e : *rd) {
      if (!e.is_string()) continue;
      const std::string s = e.get<std::string>();
      if (s.find('@') == std::string::npos) continue;
      if (!repository.empty() && DigestRepository(s) != repository) continue;
      c.digest = s.substr(s.find('@') + 1);
      break;
    }
  }
  c.source = std::string(kSource);
  c.source_kind = "docker";
  return c;
}

std::unique_ptr<ImageStore> NewDockerStore(const HostFs& fs, DockerOptions options) {
  return std::make_unique<DockerStore>(fs, std::move(options));
}

}  // namespace gpunode::image
