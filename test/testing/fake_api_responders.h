// Canned answers of the API server stand-in (fake_api_server.h): well-formed ones (a JSON body, a
// Kubernetes Status with Retry-After) and hostile or broken ones (a huge body, an endless watch
// line, a trickle, a slow answer, a watch that ends at once).
#ifndef GPUNODE_TEST_TESTING_FAKE_API_RESPONDERS_H_
#define GPUNODE_TEST_TESTING_FAKE_API_RESPONDERS_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "nlohmann/json.hpp"

namespace gpunode::testing {

class FakeApiResponders {
 public:
  // One answer to one request. `stopping` is set when the server goes away: long answers end then.
  using Responder = std::function<void(const httplib::Request&, httplib::Response&, const std::atomic<bool>& stopping)>;

  static nlohmann::json StatusBody(int code, const std::string& reason, const std::string& message) {
    return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
            {"message", message}, {"reason", reason},  {"code", code}};
  }

  static Responder Json(int status, nlohmann::json body, httplib::Headers headers = {}) {
    const std::string text = body.dump();
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>&) {
      res.status = status;
      for (const auto& [k, v] : headers) res.set_header(k.c_str(), v);
      res.set_content(text, "application/json");
    };
  }
  static Responder Text(int status, std::string body, std::string content_type = "application/json") {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>&) {
      res.status = status;
      res.set_content(body, content_type.c_str());
    };
  }
  // A Kubernetes Status object: {"kind":"Status","code":409,"reason":"AlreadyExists",...};
  // retry_after >= 0 adds the Retry-After header and details.retryAfterSeconds.
  static Responder ApiStatus(int code, const std::string& reason, const std::string& message, int retry_after = -1) {
    nlohmann::json body = StatusBody(code, reason, message);
    httplib::Headers headers;
    if (retry_after >= 0) {
      body["details"]["retryAfterSeconds"] = retry_after;
      headers.emplace("Retry-After", std::to_string(retry_after));
    }
    return Json(code, body, headers);
  }
  // `bytes` of a JSON-looking body, chunked (no Content-Length) or announced by Content-Length.
  static Responder HugeBody(size_t bytes, bool content_length = false) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      auto chunk = std::make_shared<std::string>(std::string("{\"kind\":\"NodeList\",\"items\":[\"") + std::string((1 << 20) - 30, 'x'));
      auto provide = [=, &stopping](size_t offset, size_t length, httplib::DataSink& sink) {
        (void)length;
        if (stopping || offset >= bytes) return false;
        const size_t n = std::min(chunk->size(), bytes - offset);
        return sink.write(chunk->data(), n);
      };
      if (content_length) {
        res.set_content_provider(bytes, "application/json", provide);
      } else {
        res.set_chunked_content_provider("application/json", [=](size_t offset, httplib::DataSink& sink) {
          if (offset >= bytes) {
            sink.done();
            return true;
          }
          return provide(offset, 0, sink);
        });
      }
    };
  }
  // A watch answer whose first line never ends: `bytes` without a newline, in HTTP chunks of
  // `chunk` bytes (each reaches the client's receiver on its own), then the end of the answer.
  static Responder EndlessLine(size_t bytes, size_t chunk = 4096) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t offset, httplib::DataSink& sink) {
        static const std::string kChunk(1 << 16, 'x');
        if (stopping || offset >= bytes) {
          sink.done();
          return true;
        }
        return sink.write(kChunk.data(), std::min({chunk, kChunk.size(), bytes - offset}));
      });
    };
  }
  // 200 with `lines` as a watch stream (each followed by a newline), written `chunk` bytes at a
  // time; then the answer ends, or with `hold_open` stays open (no more bytes) until the client
  // goes or the server stops.
  static Responder WatchEvents(std::vector<std::string> lines, bool hold_open = false, size_t chunk = 1 << 16) {
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t offset, httplib::DataSink& sink) {
        if (offset < all.size()) return sink.write(all.data() + offset, std::min(chunk, all.size() - offset));
        while (hold_open && !stopping && sink.is_writable()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        sink.done();
        return true;
      });
    };
  }
  static Responder WatchEndsAtOnce() { return WatchEvents({}); }
  // 200, then `text` one byte every `every`, for at most `at_most` (then the answer ends).
  static Responder Trickle(std::string text, std::chrono::milliseconds every, std::chrono::milliseconds at_most) {
    return [=](const httplib::Request&, httplib::Response& res, const std::atomic<bool>& stopping) {
      res.set_chunked_content_provider("application/json", [=, &stopping](size_t, httplib::DataSink& sink) {
        const auto end = std::chrono::steady_clock::now() + at_most;
        for (size_t i = 0; !stopping && std::chrono::steady_clock::now() < end; ++i) {
          if (!sink.write(&text[i % text.size()], 1)) return false;
          std::this_thread::sleep_for(every);
        }
        sink.done();
        return true;
      });
    };
  }
  // `then`, after a pause of `delay` (a slow server).
  static Responder Slow(std::chrono::milliseconds delay, Responder then) {
    return [=](const httplib::Request& req, httplib::Response& res, const std::atomic<bool>& stopping) {
      const auto end = std::chrono::steady_clock::now() + delay;
      while (!stopping && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      then(req, res, stopping);
    };
  }

  // A strategic merge patch of the few shapes gpunode sends: lists of objects with a "type"
  // (Node conditions) merge by it; everything else as a JSON merge patch.
  static void StrategicMerge(nlohmann::json& target, const nlohmann::json& patch) {
    if (!patch.is_object() || !target.is_object()) {
      target = patch;
      return;
    }
    for (const auto& [k, v] : patch.items()) {
      if (v.is_null()) {
        target.erase(k);
      } else if (v.is_array() && target.contains(k) && target[k].is_array()) {
        for (const auto& item : v) {
          bool merged = false;
          for (auto& have : target[k]) {
            if (item.is_object() && have.is_object() && item.contains("type") &&
                have.value("type", nlohmann::json()) == item["type"]) {
              have = item;
              merged = true;
            }
          }
          if (!merged) target[k].push_back(item);
        }
      } else if (v.is_object()) {
        if (!target.contains(k) || !target[k].is_object()) target[k] = nlohmann::json::object();
        StrategicMerge(target[k], v);
      } else {
        target[k] = v;
      }
    }
  }
};

}  // namespace gpunode::testing

#endif  // GPUNODE_TEST_TESTING_FAKE_API_RESPONDERS_H_
