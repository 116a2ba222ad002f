#include "src/bench/report.h"

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace gpunode::bench {
namespace {

using nlohmann::ordered_json;

double Round(double v, int digits) {
  double f = std::pow(10.0, digits);
  return std::round(v * f) / f;
}

template <typename T>
ordered_json Opt(const std::optional<T>& v) {
  return v ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json MeasurementJson(const Measurement& m) {
  ordered_json j;
  j["name"] = m.name;
  j["backend"] = m.backend;
  j["value"] = Round(m.value, 2);
  j["unit"] = m.unit;
  if (m.reference) {
    j["ceiling"] = {{"value", Round(m.reference->value, 2)},
                    {"kind", m.reference->kind},
                    {"source", m.reference->source},
                    {"passFraction", m.reference->fraction},
                    {"passAt", Round(m.reference->fraction * m.reference->value, 2)}};
    j["fractionOfCeiling"] = Round(m.value / m.reference->value, 3);
  } else {
    j["ceiling"] = nullptr;
    j["fractionOfCeiling"] = nullptr;
  }
  j["verdict"] = VerdictName(m.verdict);
  if (m.unsupported) j["supported"] = false;
  if (m.check) {
    j["check"] = {{"samples", m.check->samples},
                  {"mismatches", m.check->mismatches},
                  {"worstErrorOverTolerance", Round(m.check->worst_ratio, 4)},
                  {"ok", m.check->ok()}};
    if (!m.check->first_mismatch.empty()) j["check"]["firstMismatch"] = m.check->first_mismatch;
  }
  if (m.burst) {
    j["burst"] = Round(*m.burst, 2);
    if (m.reference) j["burstFractionOfCeiling"] = Round(*m.burst / m.reference->value, 3);
  }
  j["iterations"] = m.iterations;
  j["timedSeconds"] = Round(m.seconds, 3);
  j["detail"] = m.detail;
  return j;
}

ordered_json TestJson(const TestResult& t) {
  ordered_json j;
  j["test"] = TestName(t.test);
  j["verdict"] = VerdictName(t.verdict);
  if (!t.reason.empty()) j["reason"] = t.reason;
  j["wallSeconds"] = Round(t.wall_s, 2);
  j["results"] = ordered_json::array();
  for (const Measurement& m : t.measurements) j["results"].push_back(MeasurementJson(m));
  return j;
}

ordered_json TelemetryJson(const Telemetry& t) {
  ordered_json j;
  j["samples"] = t.samples;
  j["maxTemperatureC"] = Opt(t.max_temperature_c);
  j["maxPowerW"] = t.max_power_w ? ordered_json(Round(*t.max_power_w, 1)) : ordered_json(nullptr);
  j["powerLimitW"] = t.power_limit_w ? ordered_json(Round(*t.power_limit_w, 1)) : ordered_json(nullptr);
  j["smClockMHz"] = {{"min", Opt(t.min_sm_clock_mhz)},
                     {"mean", t.mean_sm_clock_mhz ? ordered_json(Round(*t.mean_sm_clock_mhz, 0)) : ordered_json(nullptr)},
                     {"max", Opt(t.max_sm_clock_mhz)}};
  j["clockEventReasons"] = ClockEventReasonNames(t.clock_event_reasons);
  j["performanceLimited"] = IsPerformanceLimiting(t.clock_event_reasons);
  if (!t.error.empty()) j["error"] = t.error;
  return j;
}

const char* Color(Verdict v, bool color) {
  if (!color) return "";
  switch (v) {
    case Verdict::kPass: return "\033[32m";
    case Verdict::kFail:
    case Verdict::kError: return "\033[31m";
    case Verdict::kSkipped: return "\033[33m";
    default: return "";
  }
}

std::string Badge(Verdict v, bool color) {
  std::string s = absl::StrFormat("%-10s", VerdictName(v));
  if (!color || *Color(v, color) == '\0') return s;
  return absl::StrCat(Color(v, color), s, "\033[0m");
}

void RenderTest(std::string& out, const TestResult& t, bool color) {
  if (t.measurements.empty()) {
    absl::StrAppendFormat(&out, "  %-8s %-36s %s %s\n", TestName(t.test), "", Badge(t.verdict, color),
                          t.reason);
    return;
  }
  for (const Measurement& m : t.measurements) {
    std::string what = absl::StrCat(m.name, " ", m.backend);
    std::string value = m.verdict == Verdict::kError || m.unsupported ? "-" : absl::StrFormat("%.1f %s", m.value, m.unit);
    std::string ceiling = "-", pct = "";
    if (m.reference) {
      ceiling = absl::StrFormat("%.0f %s", m.reference->value, m.reference->kind);
      pct = absl::StrFormat("%.0f%%", 100 * m.value / m.reference->value);
    }
    std::string note = m.detail;
    if (m.check && m.check->ok()) note = absl::StrCat("check ", m.check->samples, "/", m.check->samples, " ok; ", note);
    if (m.burst) {
      note = absl::StrCat(absl::StrFormat("burst %.1f %s", *m.burst, m.unit),
                          m.reference ? absl::StrFormat(" (%.0f%%)", 100 * *m.burst / m.reference->value) : "",
                          "; ", note);
    }
    absl::StrAppendFormat(&out, "  %-8s %-26s %16s %22s %5s  %s %s\n", TestName(t.test), what, value,
                          ceiling, pct, Badge(m.verdict, color), note);
  }
  if (!t.reason.empty()) absl::StrAppendFormat(&out, "  %-8s %s: %s\n", "", VerdictName(t.verdict), t.reason);
}

}  // namespace

Verdict RollUpTest(const TestResult& t) {
  if (t.verdict == Verdict::kError || t.verdict == Verdict::kSkipped) return t.verdict;
  if (t.measurements.empty()) return Verdict::kSkipped;
  bool any_pass = false;
  Verdict worst = Verdict::kPass;
  for (const Measurement& m : t.measurements) {
    if (m.unsupported) continue;  // bf16 on Turing: reported, not judged
    any_pass |= m.verdict == Verdict::kPass;
    if (m.verdict != Verdict::kNoCeiling) worst = Worst(worst, m.verdict);
  }
  if (!any_pass && worst == Verdict::kPass) return Verdict::kNoCeiling;
  return worst;
}

void Finalize(BenchReport& report) {
  Verdict overall = Verdict::kPass;
  bool any_judged = false;
  for (GpuResult& g : report.gpus) {
    if (g.skipped) {
      g.verdict = g.verdict == Verdict::kError ? Verdict::kError : Verdict::kSkipped;
      overall = Worst(overall, g.verdict);
      any_judged = true;
      continue;
    }
    Verdict v = Verdict::kPass;
    bool judged = false;
    for (const TestResult& t : g.tests) {
      if (t.verdict == Verdict::kNoCeiling) continue;
      v = Worst(v, t.verdict);
      judged = true;
    }
    g.verdict = judged ? v : Verdict::kNoCeiling;
    if (judged) {
      overall = Worst(overall, v);
      any_judged = true;
    }
  }
  if (report.p2p && (report.p2p->verdict == Verdict::kFail || report.p2p->verdict == Verdict::kError)) {
    overall = Worst(overall, report.p2p->verdict);
    any_judged = true;
  }
  report.verdict = any_judged ? overall : Verdict::kNoCeiling;
}

int ExitCode(const BenchReport& report) {
  if (report.verdict == Verdict::kFail || report.verdict == Verdict::kError) return 2;
  if (report.verdict == Verdict::kSkipped || report.interrupted) return 1;
  return 0;
}

ordered_json ToJson(const BenchReport& r) {
  ordered_json j;
  j["apiVersion"] = "gpunode/v1";
  j["kind"] = "BenchReport";
  j["hostname"] = r.hostname;
  j["verdict"] = VerdictName(r.verdict);
  j["interrupted"] = r.interrupted;
  j["wallSeconds"] = Round(r.wall_s, 2);
  ordered_json tests = ordered_json::array();
  for (TestKind t : r.options.tests) tests.push_back(TestName(t));
  ordered_json gpus_opt = r.options.gpus ? ordered_json(*r.options.gpus) : ordered_json("all");
  j["options"] = {{"tests", tests}, {"gpus", gpus_opt}, {"durationSeconds", r.options.duration_s}, {"gemmLibrary", r.options.gemm_library},
                  {"force", r.options.force}, {"ptx", r.options.ptx}};
  j["driver"] = {{"version", r.driver_version},
                 {"cudaDriverVersion", absl::StrFormat("%d.%d", r.cuda_driver_version / 1000,
                                                       (r.cuda_driver_version % 1000) / 10)},
                 {"cudaLibrary", r.cuda_library}};
  ordered_json targets = ordered_json::array();
  if (KernelsAvailable(EmbeddedPtx()).ok()) targets.push_back("compute_80");
  if (KernelsAvailable(EmbeddedPtxSm75()).ok()) targets.push_back("compute_75");
  j["kernels"] = {{"ptxTargets", targets},
                  {"embedded", true},
                  {"hopperGemm", KernelsAvailable(EmbeddedPtxSm90a()).ok() ? "sm_90a" : "none"}};
  j["gemmLibrary"] = r.gemm_library.empty() ? ordered_json(nullptr) : ordered_json(r.gemm_library);
  if (!r.gemm_library_note.empty()) j["gemmLibraryNote"] = r.gemm_library_note;
  j["gpus"] = ordered_json::array();
  for (const GpuResult& g : r.gpus) {
    ordered_json gj;
    gj["index"] = g.index;
    gj["name"] = g.name;
    gj["uuid"] = g.uuid;
    gj["busId"] = g.bus_id;
    gj["cudaOrdinal"] = Opt(g.cuda_ordinal);
    gj["computeCapability"] = g.compute_capability;
    gj["ptxTarget"] = g.ptx_target.empty() ? ordered_json(nullptr) : ordered_json(g.ptx_target);
    gj["ceilingModel"] = g.ceiling_model.empty() ? ordered_json(nullptr) : ordered_json(g.ceiling_model);
    gj["pcieLink"] = {{"gen", Opt(g.pcie_gen)}, {"width", Opt(g.pcie_width)},
                      {"genMax", Opt(g.pcie_gen_max)}, {"widthMax", Opt(g.pcie_width_max)}};
    gj["verdict"] = VerdictName(g.verdict);
    if (g.skipped) gj["skipReason"] = g.skip_reason;
    if (!g.busy_pids.empty()) gj["busyPids"] = g.busy_pids;
    gj["tests"] = ordered_json::array();
    for (const TestResult& t : g.tests) gj["tests"].push_back(TestJson(t));
    gj["telemetry"] = g.skipped ? ordered_json(nullptr) : TelemetryJson(g.telemetry);
    j["gpus"].push_back(gj);
  }
  j["p2p"] = r.p2p ? TestJson(*r.p2p) : ordered_json(nullptr);
  return j;
}

std::string RenderText(const BenchReport& r, bool color) {
  std::string out;
  bool ran_gemm = false;
  for (const GpuResult& g : r.gpus) {
    for (const TestResult& t : g.tests) ran_gemm |= t.test == TestKind::kGemm;
  }
  absl::StrAppendFormat(&out, "gpunode bench on %s: driver %s (CUDA %d.%d)%s\n", r.hostname,
                        r.driver_version.empty() ? "?" : r.driver_version, r.cuda_driver_version / 1000,
                        (r.cuda_driver_version % 1000) / 10,
                        !ran_gemm ? ""
                        : r.gemm_library.empty() ? ", GEMM via gpunode's own kernels"
                                                 : ", GEMM via " + r.gemm_library);
  if (!r.gemm_library_note.empty()) absl::StrAppend(&out, "  (", r.gemm_library_note, ")\n");
  for (const GpuResult& g : r.gpus) {
    absl::StrAppendFormat(&out, "\nGPU %u  %s  %s  ceilings: %s\n", g.index, g.name, g.bus_id,
                          g.ceiling_model.empty() ? "unknown model (numbers only)" : g.ceiling_model);
    if (g.skipped) {
      absl::StrAppendFormat(&out, "  %s %s\n", Badge(g.verdict, color), g.skip_reason);
      continue;
    }
    absl::StrAppendFormat(&out, "  %-8s %-26s %16s %22s %5s  %-10s %s\n", "test", "measure", "value",
                          "ceiling", "%", "verdict", "notes");
    for (const TestResult& t : g.tests) RenderTest(out, t, color);
    const Telemetry& t = g.telemetry;
    std::vector<std::string> reasons = ClockEventReasonNames(t.clock_event_reasons);
    absl::StrAppendFormat(
        &out, "  telemetry: max %s C, max %s W (limit %s W), SM clock %s-%s MHz (mean %s), clock events: %s%s\n",
        t.max_temperature_c ? absl::StrCat(*t.max_temperature_c) : "?",
        t.max_power_w ? absl::StrFormat("%.0f", *t.max_power_w) : "?",
        t.power_limit_w ? absl::StrFormat("%.0f", *t.power_limit_w) : "?",
        t.min_sm_clock_mhz ? absl::StrCat(*t.min_sm_clock_mhz) : "?",
        t.max_sm_clock_mhz ? absl::StrCat(*t.max_sm_clock_mhz) : "?",
        t.mean_sm_clock_mhz ? absl::StrFormat("%.0f", *t.mean_sm_clock_mhz) : "?",
        reasons.empty() ? "none" : absl::StrJoin(reasons, ","), t.error.empty() ? "" : absl::StrCat(" (", t.error, ")"));
    absl::StrAppendFormat(&out, "  GPU %u verdict: %s\n", g.index, Badge(g.verdict, color));
  }
  if (r.p2p) {
    absl::StrAppend(&out, "\nnode\n");
    RenderTest(out, *r.p2p, color);
  }
  absl::StrAppendFormat(&out, "\nverdict: %s%s  (%.1f s)\n", Badge(r.verdict, color),
                        r.interrupted ? " (interrupted)" : "", r.wall_s);
  return out;
}

ordered_json CardSummary(const BenchReport& r) {
  ordered_json j;
  j["verdict"] = VerdictName(r.verdict);
  j["gemmLibrary"] = r.gemm_library.empty() ? ordered_json(nullptr) : ordered_json(r.gemm_library);
  j["gpus"] = ordered_json::array();
  for (const GpuResult& g : r.gpus) {
    ordered_json gj;
    gj["index"] = g.index;
    gj["verdict"] = VerdictName(g.verdict);
    if (g.skipped) gj["skipReason"] = g.skip_reason;
    ordered_json results = ordered_json::object();
    for (const TestResult& t : g.tests) {
      for (const Measurement& m : t.measurements) {
        std::string key = absl::StrCat(TestName(t.test), ".", m.name);
        if (absl::StartsWith(m.backend, "gpunode-") && t.test == TestKind::kGemm && !r.gemm_library.empty()) {
          key += ".kernel";
        }
        results[key] = {{"value", Round(m.value, 1)}, {"unit", m.unit}, {"verdict", VerdictName(m.verdict)}};
      }
    }
    gj["results"] = results;
    j["gpus"].push_back(gj);
  }
  return j;
}

}  // namespace gpunode::bench
