#!/usr/bin/env python3
"""Run every query of Grafana dashboards against a Prometheus, the way Grafana would.

    test/k8s/grafana_queries.py --prometheus URL [options] DASHBOARD.json [DASHBOARD.json ...]

For each dashboard: resolve its template variables in dependency order, then interpolate and run
every panel target's `expr` (panels inside rows too; only targets with "hide": true are skipped) as
an instant query, and print one line per query: status, number of series, panel title, refId, the
resolved expr. Exit 0 when every query returned at least one series, 1 when any returned none or an
error, or when a target's legendFormat names a label ({{label}}) that none of its series has (status
"legend": the panel would draw blank names); they are listed at the end, 2 on bad input (a file that is not a dashboard, no panels, a
variable cycle) or when Prometheus cannot be reached. `-o json` prints one JSON document instead.

What "as Grafana does" means here, with the sources it follows (github.com/grafana/grafana):
  - Variable references: $var, [[var]], [[var:fmt]], ${var}, ${var:fmt} (template_srv.ts's regex).
    Unknown names are left as they are (Prometheus then rejects the query, which is reported).
  - Prometheus' own formatting (packages/grafana-prometheus/src/escaping.ts interpolateQueryExpr):
    a variable that is neither multi nor includeAll gets \\ and ' escaped; otherwise each value is
    regex-escaped for a PromQL string (`.` -> `\\\\.`) and several values become `(a|b|c)`. An
    explicit ${var:fmt} uses Grafana's format registry instead (formatRegistry.ts: regex, pipe,
    csv, raw, json, glob, doublequote, singlequote, sqlstring, lucene, text, queryparam,
    percentencode, distributed).
  - "All" selected: the variable's allValue when set (itself interpolated, never escaped), else
    every option's value, formatted as above (template_srv.ts getAllValue/replace).
  - Query variables (metric_find_query.ts): label_values(label), label_values(selector, label)
    (/api/v1/label/<label>/values with match[]), label_names(), metrics(regex), query_result(expr)
    (text `name{l="v",...} value ts_ms`, usually cut by the variable's regex), and a bare selector
    (/api/v1/series). The variable's regex (first capture group, or named groups text/value) and
    sort (1-8) are applied, duplicates dropped, "All" put first when includeAll.
  - custom (`a,b` or `text : value`, `\\,` escapes a comma), constant, textbox, interval (with
    $__auto_interval_<name>) and datasource variables (its current value or the name "Prometheus").
  - Selection: the dashboard's saved current value when it is still an option (All stays All),
    else the first option (All when includeAll) -- what Grafana does on load. --var NAME=VALUE
    (repeatable; "All" for all) overrides.
  - Built-ins (packages/grafana-prometheus/src/datasource.ts, @grafana/data rangeutil):
    $__interval = roundInterval(range / max data points), at least the scrape interval and the
    panel's or target's min interval; $__rate_interval = max($__interval + scrape, 4 * scrape);
    $__range, $__range_s, $__range_ms, $__interval_ms, $__from, $__to, $__dashboard. $interval,
    the name older dashboards use, is $__interval unless the dashboard defines a variable of that name.
  - Repeated panels ("repeat": VAR) run once per selected value of VAR.
Range-vector expressions are fine as instant queries (the result is a matrix; its series count).

Grafana's formatting and interval arithmetic live in grafana_format.py beside this file.
Everything read is bounded: the dashboard file (--max-bytes), each Prometheus answer (same limit),
each request's time (--timeout). Standard library only.
"""
import argparse
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from grafana_format import (  # noqa: E402 (the module beside this script)
    BadInput, VAR_RE, format_value, js_regex, parse_duration, references, round_interval_ms,
    seconds_to_hms, sort_options)

ALL = "$__all"
BAD_INPUT = 2


class PromError(Exception):
    pass


# --- Prometheus -------------------------------------------------------------------------------

class Prometheus:
    def __init__(self, url, timeout, max_bytes):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.max_bytes = max_bytes

    def call(self, path, params, post=False):
        """GET or POST (form) an /api/v1 path; returns the "data" member or raises PromError."""
        enc = urllib.parse.urlencode(params, doseq=True)
        if post:
            req = urllib.request.Request(self.url + path, data=enc.encode(), method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        else:
            req = urllib.request.Request(self.url + path + ("?" + enc if enc else ""))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                body = resp.read(self.max_bytes + 1)
        except urllib.error.HTTPError as e:  # Prometheus answers 400/422 with a JSON error body
            body = e.read(self.max_bytes + 1)
        except (urllib.error.URLError, OSError) as e:
            raise PromError(f"cannot reach {self.url}: {getattr(e, 'reason', e)}") from None
        if len(body) > self.max_bytes:
            raise PromError(f"answer larger than {self.max_bytes} bytes")
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            raise PromError(f"{path}: not a Prometheus API answer: {body[:120]!r}") from None
        if not isinstance(doc, dict):
            raise PromError(f"{path}: not a Prometheus API answer")
        if doc.get("status") != "success":
            raise PromError(f"{doc.get('errorType', 'error')}: {doc.get('error', 'no error text')}")
        return doc.get("data")

    def query(self, expr, at):
        return self.call("/api/v1/query", {"query": expr, "time": f"{at:.3f}"}, post=True)


class Dashboard:
    def __init__(self, doc, path, args, prom):
        self.doc, self.path, self.args, self.prom = doc, path, args, prom
        self.vars = {}  # name -> variable model with "options" and "current_values"
        self.now = time.time()
        self.range_s = args.range_s
        self.builtins = {}

    # interpolation ---------------------------------------------------------------
    def replace(self, text, scoped=None, fmt_default=None):
        scoped = scoped or {}

        def sub(m):
            name = m.group(1) or m.group(2) or m.group(4)
            fmt = m.group(3) or m.group(6) or fmt_default
            if fmt:
                fmt = fmt.split(":")[0]  # date:iso and friends: the format name only
            if name in scoped:
                return format_value(scoped[name], fmt, self.vars.get(name), scoped[name])
            if name == "interval" and name not in self.vars and "__interval" in scoped:
                return scoped["__interval"]
            var = self.vars.get(name)
            if var is None:
                return m.group(0)
            values = var["current_values"]
            text = " + ".join(var["current_texts"])
            if var["current_all"]:
                if var.get("allValue"):
                    return self.replace(var["allValue"], scoped)
                values = [o["value"] for o in var["options"] if o["value"] != ALL]
                text = "All"
            value = values if (var.get("multi") or var["current_all"] or len(values) != 1) else values[0]
            return format_value(value, fmt, var, text)

        return VAR_RE.sub(sub, text)

    # variable resolution ------------------------------------------------------------
    def variables(self):
        lst = (self.doc.get("templating") or {}).get("list") or []
        if not isinstance(lst, list):
            raise BadInput("templating.list is not a list")
        models = {}
        for i, v in enumerate(lst):
            if not isinstance(v, dict) or not isinstance(v.get("name"), str) or not v["name"]:
                raise BadInput(f"templating.list[{i}] has no name")
            models[v["name"]] = v
        deps = {n: (references(self.query_text(v)) | references(v.get("regex") or "")
                    | references(json.dumps(v.get("datasource")))) & set(models) - {n}
                for n, v in models.items()}
        done, order = set(), []
        while len(done) < len(models):
            ready = [n for n in models if n not in done and deps[n] <= done]
            if not ready:
                cyc = sorted(n for n in models if n not in done)
                raise BadInput(f"variables depend on each other in a cycle: {', '.join(cyc)}")
            for n in ready:
                done.add(n)
                order.append(n)
        for n in order:
            self.resolve(models[n])
        return [self.vars[n] for n in order if n in self.vars]

    @staticmethod
    def query_text(v):
        q = v.get("query")
        if isinstance(q, dict):
            if isinstance(q.get("query"), str) and q["query"]:
                return q["query"]
            t = q.get("qryType")
            if t == 0:
                return f"label_names({q['match']})" if q.get("match") else "label_names()"
            if t == 1:
                sel = q.get("metric") or ""
                filters = q.get("labelFilters") or []
                if filters:
                    sel += "{" + ", ".join(f'{f.get("label")}{f.get("op")}"{f.get("value")}"' for f in filters) + "}"
                return f"label_values({sel},{q.get('label')})" if sel else f"label_values({q.get('label')})"
            if t == 2:
                return f"metrics({q.get('metric', '')})"
            if t == 3:
                return "query_result(" + re.sub(r"[\r\n]+", "", q.get("varQuery") or "") + ")"
            if t == 4:
                return q.get("seriesQuery") or ""
            if t == 5:
                return q.get("classicQuery") or ""
            return ""
        return q if isinstance(q, str) else ("" if q is None else str(q))

    def find_values(self, v):
        """Options of a query variable from Prometheus: list of texts."""
        q = self.replace(self.query_text(v).strip(), self.builtins)
        where = f"variable {v['name']!r} ({q})"
        start, end = self.now - self.range_s, self.now
        rng = {"start": f"{start:.3f}", "end": f"{end:.3f}"}
        try:
            m = re.match(r"^label_names\(\)\s*$", q)
            if m:
                return self.prom.call("/api/v1/labels", rng) or []
            m = re.match(r"^label_names\((.+)\)\s*$", q)
            if m:
                return self.prom.call("/api/v1/labels", {**rng, "match[]": '{__name__=~".*' + m.group(1) + '.*"}'}) or []
            m = re.match(r"^label_values\((?:(.+),\s*)?([a-zA-Z_][a-zA-Z0-9_]*)\)\s*$", q)
            if m:
                sel, label = m.group(1), m.group(2)
                params = dict(rng)
                if sel and sel.replace(" ", "") != "{}":
                    params["match[]"] = sel
                return self.prom.call(f"/api/v1/label/{label}/values", params) or []
            m = re.match(r"^metrics\((.+)\)\s*$", q)
            if m:
                names = self.prom.call("/api/v1/label/__name__/values", rng) or []
                r = js_regex(m.group(1), where)
                return [n for n in names if r.search(n)]
            m = re.match(r"^query_result\((.+)\)\s*$", q)
            if m:
                data = self.prom.query(m.group(1), end)
                if data["resultType"] in ("scalar", "string"):
                    return [str(data["result"][1])]
                out = []
                for s in data["result"]:
                    labels = dict(s["metric"])
                    name = labels.pop("__name__", "")
                    lv = ",".join(f'{k}="{val}"' for k, val in labels.items())
                    out.append(f"{name}{{{lv}}} {s['value'][1]} {int(float(s['value'][0]) * 1000)}")
                return out
            if q in ("", "label_values()", "metrics()", "query_result()"):
                return []
            series = self.prom.call("/api/v1/series", {**rng, "match[]": q}) or []
            out = []
            for s in series:
                labels = dict(s)
                name = labels.pop("__name__", "")
                out.append(name + "{" + ", ".join(f'{k}="{val}"' for k, val in labels.items()) + "}")
            return out
        except PromError as e:
            raise PromError(f"{where}: {e}") from None

    def resolve(self, v):
        name, typ = v["name"], v.get("type", "query")
        v = dict(v)
        opts = []  # list of {"text", "value"}
        if typ == "query":
            dstype = (v.get("datasource") or {}).get("type") if isinstance(v.get("datasource"), dict) else None
            if dstype not in (None, "prometheus", "datasource"):
                raise BadInput(f"variable {name!r}: data source type {dstype!r} is not Prometheus")
            try:
                texts = [str(t) for t in self.find_values(v)]
            except PromError as e:
                if "cannot reach" in str(e):
                    raise
                v["error"], texts = str(e), []
            rx = js_regex(v["regex"], f"variable {name!r}") if v.get("regex") else None
            for t in texts:
                text = value = t
                if rx:
                    m = rx.search(t)
                    if not m:
                        continue
                    gd = m.groupdict()
                    if gd.get("text") is not None or gd.get("value") is not None:
                        text = gd.get("text") if gd.get("text") is not None else gd.get("value")
                        value = gd.get("value") if gd.get("value") is not None else text
                    elif m.groups():
                        text = value = m.group(1) or ""
                opts.append({"text": text, "value": value})
            opts = sort_options(opts, v.get("sort") or 0)
        elif typ == "custom":
            for part in re.findall(r"(?:\\,|[^,])+", self.replace(self.query_text(v), self.builtins)):
                part = part.strip()
                text, _, value = part.partition(" : ")
                text = text.replace("\\,", ",")
                opts.append({"text": text, "value": (value or text).replace("\\,", ",")})
        elif typ == "interval":
            for part in self.query_text(v).split(","):
                if part.strip():
                    opts.append({"text": part.strip(), "value": part.strip()})
            if v.get("auto"):
                count = int(v.get("auto_count") or 30)
                low = parse_duration(v.get("auto_min") or "10s")
                auto = max(round_interval_ms(self.range_s * 1000 / count) / 1000, low)
                self.builtins[f"__auto_interval_{name}"] = seconds_to_hms(auto)
                opts.insert(0, {"text": "auto", "value": f"$__auto_interval_{name}"})
        elif typ in ("constant", "textbox"):
            val = self.replace(self.query_text(v), self.builtins)
            cur = (v.get("current") or {}).get("value")
            if typ == "textbox" and isinstance(cur, str) and cur:
                val = cur
            opts.append({"text": val, "value": val})
        elif typ == "datasource":
            if v.get("query") not in (None, "", "prometheus"):
                raise BadInput(f"variable {name!r}: data source variable of type {v.get('query')!r}, not prometheus")
            cur = (v.get("current") or {}).get("text")
            if isinstance(cur, list):
                cur = cur[0] if cur else None
            dsname = cur if isinstance(cur, str) and cur and cur != "default" else "Prometheus"
            opts.append({"text": dsname, "value": dsname})
        elif typ == "adhoc":
            if v.get("filters"):
                sys.stderr.write(f"grafana_queries: {self.path}: ad hoc filters of {name!r} are not applied\n")
            return
        else:
            sys.stderr.write(f"grafana_queries: {self.path}: variable {name!r} of type {typ!r} is left unresolved\n")
            return
        seen, uniq = set(), []
        for o in opts:
            if o["value"] not in seen:
                seen.add(o["value"])
                uniq.append(o)
        opts = uniq
        if v.get("includeAll") and typ in ("query", "custom"):
            opts.insert(0, {"text": "All", "value": ALL})
        v["options"] = opts
        self.select(v)
        # interval variables' $__auto_interval_x value resolves through builtins
        v["current_values"] = [self.builtins.get(x[1:], x) if x.startswith("$__auto_interval_") else x
                               for x in v["current_values"]]
        self.vars[name] = v

    def select(self, v):
        name, opts = v["name"], v["options"]
        values = {o["value"] for o in opts}
        want = None
        if name in self.args.var:
            want = self.args.var[name]
            if want in (["All"], [ALL]):
                if not v.get("includeAll"):
                    raise BadInput(f"--var {name}=All: the variable has no All option")
                want = [ALL]
            else:
                missing = [w for w in want if w not in values]
                if missing and v.get("type") in ("query", "custom"):
                    raise BadInput(f"--var {name}: {missing} not among its values {sorted(values)[:20]}")
                if missing:  # constant/textbox/interval/datasource: take the given value
                    opts.extend({"text": w, "value": w} for w in missing)
        else:
            cur = (v.get("current") or {}).get("value")
            cur = cur if isinstance(cur, list) else ([cur] if isinstance(cur, str) else [])
            if cur and cur[0] == ALL and v.get("includeAll"):
                want = [ALL]
            else:
                kept = [c for c in cur if c in values]
                want = kept if (v.get("multi") and kept) else kept[:1]
            if not want:
                want = [opts[0]["value"]] if opts else []
        v["current_all"] = want == [ALL]
        texts = {o["value"]: o["text"] for o in opts}
        v["current_values"] = [] if v["current_all"] else list(want)
        v["current_texts"] = ["All"] if v["current_all"] else [texts.get(w, w) for w in want]

    # panels -------------------------------------------------------------------------------
    def panels(self):
        out = []

        def walk(ps, where):
            if not isinstance(ps, list):
                raise BadInput(f"{where} is not a list")
            for p in ps:
                if isinstance(p, dict):
                    out.append(p)
                    if p.get("panels"):
                        walk(p["panels"], "a row's panels")
        walk(self.doc.get("panels") or [], "panels")
        for row in self.doc.get("rows") or []:  # schema before 16
            if isinstance(row, dict):
                walk(row.get("panels") or [], "rows[].panels")
        return out

    def intervals(self, min_interval):
        scrape = self.args.scrape_interval
        low = scrape
        if min_interval:
            try:
                low = max(low, parse_duration(self.replace(str(min_interval), self.builtins)))
            except ValueError:
                pass
        interval_ms = round_interval_ms(self.range_s * 1000 / self.args.max_data_points)
        interval = max(interval_ms / 1000, low)
        interval = max(interval, math.ceil(self.range_s / 11000))  # datasource.ts adjustInterval
        rate = max(interval + scrape, 4 * scrape)
        return {"__interval": seconds_to_hms(interval), "__interval_ms": str(int(interval * 1000)),
                "__rate_interval": f"{int(rate)}s", "__rate_interval_ms": str(int(rate * 1000))}

    def run(self):
        result = {"dashboard": self.path, "title": self.doc.get("title"), "variables": [], "queries": []}
        r = int(round(self.range_s))
        self.builtins = {"__range": f"{r}s", "__range_s": str(r), "__range_ms": str(r * 1000),
                         "__from": str(int((self.now - self.range_s) * 1000)), "__to": str(int(self.now * 1000)),
                         "__dashboard": str(self.doc.get("title") or "")}
        self.builtins.update(self.intervals(None))
        for v in self.variables():
            result["variables"].append({"name": v["name"], "type": v.get("type", "query"),
                                        "selected": v["current_texts"], "error": v.get("error"),
                                        "values": [o["value"] for o in v["options"] if o["value"] != ALL]})
        panels = self.panels()
        if not any(p.get("type") != "row" for p in panels):
            raise BadInput("no panels")
        for p in panels:
            targets = p.get("targets") or []
            if not isinstance(targets, list):
                raise BadInput(f"panel {p.get('title')!r}: targets is not a list")
            repeat = p.get("repeat")
            scopes = [({}, "")]
            if repeat and repeat in self.vars:
                rv = self.vars[repeat]
                vals = rv["current_values"] or [o["value"] for o in rv["options"] if o["value"] != ALL]
                scopes = [({repeat: x}, f" ({repeat}={x})") for x in vals] or scopes
            for t in targets:
                if not isinstance(t, dict) or t.get("hide") is True:
                    continue
                title = str(p.get("title") or f"panel {p.get('id')}")
                entry_base = {"panel": title, "refId": t.get("refId")}
                ds = t.get("datasource") if isinstance(t.get("datasource"), dict) else p.get("datasource")
                dstype = ds.get("type") if isinstance(ds, dict) else None
                expr = t.get("expr")
                if dstype not in (None, "prometheus") or not isinstance(expr, str) or not expr.strip():
                    result["queries"].append({**entry_base, "status": "skipped", "expr": expr,
                                              "error": f"not a Prometheus query (data source type {dstype!r})"})
                    continue
                for scope, suffix in scopes:
                    scoped = {**self.builtins, **self.intervals(t.get("interval") or p.get("interval")), **scope}
                    entry = {**entry_base, "panel": title + suffix}
                    resolved = self.replace(expr, scoped)
                    entry["expr"] = resolved
                    try:
                        data = self.prom.query(resolved, self.now)
                        series = data["result"] if data["resultType"] in ("vector", "matrix") else None
                        n = 1 if series is None else len(series)
                        entry.update(series=n, status="ok" if n else "empty")
                        # A legend naming a label no series has: the panel draws blank names.
                        legend = t.get("legendFormat") if isinstance(t.get("legendFormat"), str) else ""
                        missing = [lb for lb in dict.fromkeys(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
                                   if series and not any(lb in s.get("metric", {}) for s in series)]
                        if missing:
                            entry.update(status="legend", error=f"legendFormat {legend!r} names labels no series has: {', '.join(missing)}")
                    except PromError as e:
                        entry.update(series=None, status="error", error=str(e))
                    result["queries"].append(entry)
        return result


# --- command line -----------------------------------------------------------------------------

def load(path, max_bytes):
    try:
        with open(path, "rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as e:
        raise BadInput(f"cannot read: {e.strerror}") from None
    if len(data) > max_bytes:
        raise BadInput(f"larger than {max_bytes} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise BadInput(f"not JSON: {str(e)[:200]}") from None
    if isinstance(doc, dict) and isinstance(doc.get("dashboard"), dict):  # API export wrapper
        doc = doc["dashboard"]
    if not isinstance(doc, dict) or not (isinstance(doc.get("panels"), list) or isinstance(doc.get("rows"), list)):
        raise BadInput("not a Grafana dashboard (no panels)")
    return doc


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Run a Grafana dashboard's queries against Prometheus.")
    ap.add_argument("--prometheus", required=True, metavar="URL", help="Prometheus base URL")
    ap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    ap.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                    help="select VALUE for variable NAME (repeat for several values; All for all)")
    ap.add_argument("--range", default=None, help="dashboard time range (default: the dashboard's, else 1h)")
    ap.add_argument("--scrape-interval", default="15s", help="the data source's scrape interval (Grafana's default 15s)")
    ap.add_argument("--max-data-points", type=int, default=1000, help="panel width in points for $__interval")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds per request")
    ap.add_argument("--max-bytes", type=int, default=16 << 20, help="largest dashboard file or Prometheus answer")
    ap.add_argument("dashboards", nargs="+", metavar="DASHBOARD.json")
    a = ap.parse_args(argv)
    sel = {}
    for item in a.var:
        name, eq, value = item.partition("=")
        if not eq or not re.fullmatch(r"\w+", name):
            ap.error(f"--var {item!r}: want NAME=VALUE")
        sel.setdefault(name, []).append(value)
    a.var = sel
    try:
        a.scrape_interval = parse_duration(a.scrape_interval)
        if a.scrape_interval <= 0:
            raise ValueError("scrape interval must be positive")
        a.fixed_range = parse_duration(a.range) if a.range else None
    except ValueError as e:
        ap.error(str(e))
    if a.max_data_points < 1 or a.max_bytes < 1024 or a.timeout <= 0:
        ap.error("--max-data-points, --max-bytes and --timeout must be positive (--max-bytes >= 1024)")
    return a


def dashboard_range(doc):
    frm = str((doc.get("time") or {}).get("from") or "")
    m = re.fullmatch(r"now-(\S+)", frm)
    try:
        return parse_duration(m.group(1)) if m else 3600.0
    except ValueError:
        return 3600.0


def main(argv):
    a = parse_args(argv)
    prom = Prometheus(a.prometheus, a.timeout, a.max_bytes)
    try:
        prom.query("1", time.time())
    except PromError as e:
        sys.stderr.write(f"grafana_queries: Prometheus at {a.prometheus} does not answer: {e}\n")
        return BAD_INPUT
    results, failed = [], []
    for path in a.dashboards:
        try:
            doc = load(path, a.max_bytes)
            a.range_s = a.fixed_range or dashboard_range(doc)
            res = Dashboard(doc, path, a, prom).run()
        except BadInput as e:
            sys.stderr.write(f"grafana_queries: {path}: {e}\n")
            return BAD_INPUT
        except PromError as e:
            sys.stderr.write(f"grafana_queries: {path}: {e}\n")
            return BAD_INPUT if "cannot reach" in str(e) else 1
        results.append(res)
        failed += [(path, {"panel": f"variable {v['name']}", "refId": "-", "status": "error", "error": v["error"]})
                   for v in res["variables"] if v.get("error")]
        failed += [(path, q) for q in res["queries"] if q["status"] in ("empty", "error", "legend")]
    if a.output == "json":
        print(json.dumps({"prometheus": a.prometheus, "dashboards": results,
                          "failed": len(failed)}, indent=2))
    else:
        for res in results:
            print(f"== {res['dashboard']}: {res['title']}")
            for v in res["variables"]:
                print(f"   var {v['name']} ({v['type']}) = {', '.join(v['selected'])}  [{len(v['values'])} values]"
                      + (f"  -- {v['error']}" if v.get("error") else ""))
            for q in res["queries"]:
                n = "-" if q.get("series") is None else q["series"]
                print(f"{q['status']:<7} {n:>4}  {q['panel']} [{q['refId']}]  {q['expr']}"
                      + (f"  -- {q['error']}" if q.get("error") else ""))
            counts = {s: sum(q["status"] == s for q in res["queries"]) for s in ("ok", "empty", "error", "legend", "skipped")}
            print(f"   {len(res['queries'])} queries: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
        if failed:
            print(f"FAILED: {len(failed)} queries returned no series or an error:")
            for path, q in failed:
                print(f"  {path}: {q['panel']} [{q['refId']}] {q['status']}"
                      + (f": {q['error']}" if q.get("error") else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
