"""Grafana's side of test/k8s/grafana_queries.py: how it formats variable values into a
Prometheus query and how it computes intervals (kept apart so each file stays readable).

Sources (github.com/grafana/grafana): packages/grafana-prometheus/src/escaping.ts
(interpolateQueryExpr, prometheusRegularEscape, prometheusSpecialRegexEscape),
public/app/features/templating/formatRegistry.ts (the ${var:format} formats), template_srv.ts (the
variable reference syntax), @grafana/data rangeutil (roundInterval, secondsToHms) and the variable
sort modes of the query variable editor. Standard library only.
"""
import json
import re
import urllib.parse


class BadInput(Exception):
    """A dashboard this tool cannot run: exit 2 with the message."""

# --- durations (Grafana's rangeutil) ----------------------------------------------------------

UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_duration(text):
    """'15s', '1m30s', '500ms' -> seconds; raises ValueError."""
    text = str(text).strip()
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * UNITS[u] for n, u in parts)


# rangeutil.roundInterval: (upper bound ms, result ms)
ROUND_STEPS = [(15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1500, 1000),
               (3500, 2000), (7500, 5000), (12500, 10000), (17500, 15000), (25000, 20000),
               (45000, 30000), (90000, 60000), (210000, 120000), (450000, 300000),
               (750000, 600000), (1050000, 900000), (1500000, 1200000), (2700000, 1800000),
               (5400000, 3600000), (9000000, 7200000), (16200000, 10800000),
               (32400000, 21600000), (86400000, 43200000), (604800000, 86400000),
               (1814400000, 604800000), (3628800000, 2592000000)]


def round_interval_ms(ms):
    for bound, result in ROUND_STEPS:
        if ms < bound:
            return result
    return 31536000000


def seconds_to_hms(sec):
    """rangeutil.secondsToHms: the largest whole unit only."""
    for unit, size in (("y", 31536000), ("d", 86400), ("h", 3600), ("m", 60)):
        if sec >= size:
            return f"{int(sec // size)}{unit}"
    if sec >= 1:
        return f"{int(sec)}s"
    return f"{int(round(sec * 1000))}ms" if sec > 0 else "0s"


# --- formatting (escaping.ts, formatRegistry.ts) ----------------------------------------------

def prom_regular_escape(v):
    return v.replace("\\", "\\\\").replace("'", "\\\\'")


def prom_regex_escape(v):
    v = v.replace("\\", "\\\\\\\\")
    return re.sub(r"[$^*{}\[\]+?.()|]", lambda m: "\\\\" + m.group(0), v)


def kbn_regex_escape(v):
    return re.sub(r"[\\^$*+?.()|\[\]{}/]", lambda m: "\\" + m.group(0), v)


def interpolate_query_expr(value, var):
    if not (var and (var.get("multi") or var.get("includeAll"))):
        if isinstance(value, list):
            return ",".join(prom_regular_escape(x) for x in value)
        return prom_regular_escape(value)
    if isinstance(value, str):
        return prom_regex_escape(value)
    esc = [prom_regex_escape(x) for x in value]
    return esc[0] if len(esc) == 1 else "(" + "|".join(esc) + ")"


def pct(v):
    return urllib.parse.quote(v, safe="-_.~")


def lucene_escape(v):
    try:
        float(v)
        return v
    except ValueError:
        return re.sub(r'([!*+\-=<>\s&|()\[\]{}^~?:\\/"])', r"\\\1", v)


def format_value(value, fmt, var, text):
    name = (var or {}).get("name", "")
    lst = value if isinstance(value, list) else None
    if fmt in (None, "", "prometheus"):
        return interpolate_query_expr(value, var)
    if fmt == "regex":
        if lst is None:
            return kbn_regex_escape(value)
        esc = [kbn_regex_escape(x) for x in lst]
        return esc[0] if len(esc) == 1 else "(" + "|".join(esc) + ")"
    if fmt == "pipe":
        return value if lst is None else "|".join(lst)
    if fmt in ("csv", "raw"):
        return value if lst is None else ",".join(lst)
    if fmt == "distributed":
        return value if lst is None else ",".join(x if i == 0 else f"{name}={x}" for i, x in enumerate(lst))
    if fmt == "json":
        return json.dumps(value, separators=(",", ":"))
    if fmt == "glob":
        return "{" + ",".join(lst) + "}" if lst is not None and len(lst) > 1 else (value if lst is None else ",".join(lst))
    quote = {"doublequote": lambda x: '"' + x.replace('"', '\\"') + '"',
             "singlequote": lambda x: "'" + x.replace("'", "\\'") + "'",
             "sqlstring": lambda x: "'" + x.replace("'", "''") + "'"}.get(fmt)
    if quote:
        return quote(value) if lst is None else ",".join(map(quote, lst))
    if fmt == "lucene":
        if lst is None:
            return lucene_escape(value)
        return "__empty__" if not lst else "(" + " OR ".join('"' + lucene_escape(x) + '"' for x in lst) + ")"
    if fmt == "percentencode":
        return pct(value) if lst is None else pct("{" + ",".join(lst) + "}")
    if fmt == "queryparam":
        return "&".join(f"var-{name}={pct(x)}" for x in (lst if lst is not None else [value]))
    if fmt == "text":
        return text
    raise BadInput(f"unknown variable format {fmt!r} (variable {name!r})")


# $var | [[var]] [[var:fmt]] | ${var} ${var.path} ${var:fmt} (template_srv.ts)
VAR_RE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^}]+))?(?::([^}]+))?\}")


def references(text):
    return {m.group(1) or m.group(2) or m.group(4) for m in VAR_RE.finditer(text or "")}


# --- variables --------------------------------------------------------------------------------

def js_regex(src, where):
    """A Grafana variable regex '/.../flags' (or bare) -> compiled Python regex."""
    flags = 0
    m = re.fullmatch(r"/(.*)/([gimsuy]*)", src, re.S)
    body = src
    if m:
        body = m.group(1)
        for f in m.group(2):
            flags |= {"i": re.I, "m": re.M, "s": re.S}.get(f, 0)
    body = re.sub(r"\(\?<(?![=!])", "(?P<", body)
    try:
        return re.compile(body, flags)
    except re.error as e:
        raise BadInput(f"{where}: regex {src!r} is not valid: {e}") from None


def sort_options(opts, mode):
    if not mode:
        return opts
    def num(o):
        m = re.match(r".*?(\d+)", o["text"])
        return int(m.group(1)) if m else -1
    def natural(o):
        return [int(p) if p.isdigit() else p.lower() for p in re.split(r"(\d+)", o["text"])]
    key, rev = {1: (lambda o: o["text"], False), 2: (lambda o: o["text"], True),
                3: (num, False), 4: (num, True),
                5: (lambda o: o["text"].lower(), False), 6: (lambda o: o["text"].lower(), True),
                7: (natural, False), 8: (natural, True)}.get(mode, (None, False))
    return sorted(opts, key=key, reverse=rev) if key else opts
