"""Shared helpers for the hand-written oracles (<name>.py beside this file).

An oracle implements its program's algorithm in plain Python (float64 floats,
i64 wrapping through `wrap`), and calls `check(__file__, {...})` with one
Python function per IR function named in the run lines. `check` reads every
`# run:` / `# run-error:` line of ../programs/<name>.ir, calls the Python
function with the parsed arguments and compares with the value written in the
file (bitwise for `==`, any NaN equal to any NaN; relative 1e-12 / absolute
1e-14 for `~=`). For a `# run-error:` line the Python function must raise
`IRError(message, stmt)`, where `stmt` is the text of the failing statement
in the .ir file (e.g. "%q = call idiv("); `check` finds its line and column
and compares them with the directive.
"""
import math
import os
import re
import struct
import sys

I64_MIN = -(2 ** 63)
I64_MAX = 2 ** 63 - 1
DEPTH_LIMIT = 100000


def wrap(x):
    """Two's-complement wrap of a Python int to i64."""
    return ((x + 2 ** 63) % 2 ** 64) - 2 ** 63


def tdiv(a, b, stmt="idiv"):
    """idiv: truncating division with irad's run-time errors."""
    if b == 0:
        raise IRError("division by zero", stmt)
    if a == I64_MIN and b == -1:
        raise IRError("integer overflow in idiv", stmt)
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trem(a, b, stmt="irem"):
    """irem: remainder with the sign of the dividend; irem(MIN, -1) == 0."""
    if b == 0:
        raise IRError("remainder by zero", stmt)
    if a == I64_MIN and b == -1:
        return 0
    q = abs(a) // abs(b)
    q = q if (a >= 0) == (b >= 0) else -q
    return a - b * q


def round_half_away(x):
    if math.isnan(x) or math.isinf(x):
        return x
    a = abs(x)
    f = math.floor(a)
    r = f + 1.0 if a - f >= 0.5 else float(f)
    return math.copysign(r, x)


def fptosi(x, stmt="fptosi"):
    if math.isnan(x) or not (-(2.0 ** 63) <= x < 2.0 ** 63):
        raise IRError("fptosi out of range", stmt)
    return int(x)


class IRError(Exception):
    def __init__(self, msg, stmt):
        Exception.__init__(self, msg)
        self.msg = msg
        self.stmt = stmt


class Depth:
    """Counts call depth like irad: the entry call is depth 1; a call that
    would make the depth exceed the limit fails at the calling statement."""

    def __init__(self):
        self.d = 0


def fmt_f64(x):
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    r = repr(float(x))
    m = re.match(r"^(-?[0-9.]+)e([+-])0*([0-9]+)$", r)
    if m:
        mant, sign, exp = m.groups()
        r = mant + "e" + ("-" if sign == "-" else "") + exp
    return r


def fmt_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return fmt_f64(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(fmt_value(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt_value(x) for x in v) + ")"
    return str(v)


# --- literal parsing (the --args syntax) -------------------------------------
TOK = re.compile(r"\s*(-?(?:inf|nan)\b|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|@[A-Za-z_][A-Za-z0-9_.]*|true|false|[\[\](),])")


def _tokens(text):
    pos, out = 0, []
    text = text.strip()
    while pos < len(text):
        m = TOK.match(text, pos)
        if not m:
            raise SyntaxError("bad literal text %r" % text[pos:])
        out.append(m.group(1))
        pos = m.end()
    return out


def _lit(toks, i, funcs):
    t = toks[i]
    if t == "[" or t == "(":
        close = "]" if t == "[" else ")"
        items = []
        i += 1
        if toks[i] != close:
            while True:
                v, i = _lit(toks, i, funcs)
                items.append(v)
                if toks[i] == ",":
                    i += 1
                    continue
                break
        assert toks[i] == close, toks[i]
        return (items if t == "[" else tuple(items)), i + 1
    if t in ("true", "false"):
        return t == "true", i + 1
    if t.startswith("@"):
        return funcs[t[1:]], i + 1
    if t in ("inf", "-inf", "nan", "-nan") or "." in t or "e" in t or "E" in t:
        return float(t), i + 1
    return int(t), i + 1


def parse_list(text, funcs):
    toks = _tokens(text)
    out, i = [], 0
    while i < len(toks):
        v, i = _lit(toks, i, funcs)
        out.append(v)
        if i < len(toks):
            assert toks[i] == ",", toks[i]
            i += 1
    return out


def same(a, b, approx):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if approx and not (math.isinf(a) or math.isinf(b)):
            return abs(a - b) <= max(1e-14, 1e-12 * abs(b))
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return (isinstance(a, list) == isinstance(b, list) and len(a) == len(b)
                and all(same(x, y, approx) for x, y in zip(a, b)))
    return False


RUN = re.compile(r"^# run: @([A-Za-z_][A-Za-z0-9_.]*)\((.*)\) (==|~=) (.+)$")
ERR = re.compile(r"^# run-error: @([A-Za-z_][A-Za-z0-9_.]*)\((.*)\) at (\d+):(\d+): (.+)$")


def locate(lines, stmt):
    hits = [(i + 1, l.index(stmt) + 1) for i, l in enumerate(lines)
            if stmt in l and not l.startswith("#")]
    if len(hits) != 1:
        raise AssertionError("statement %r found %d times" % (stmt, len(hits)))
    return hits[0]


def check(oracle_file, funcs):
    name = os.path.splitext(os.path.basename(oracle_file))[0]
    here = os.path.dirname(os.path.abspath(oracle_file))
    path = os.path.join(here, "..", "programs", name + ".ir")
    lines = open(path).read().split("\n")
    sys.setrecursionlimit(1000000)
    failures = 0
    n = 0
    fill = os.environ.get("FILL") == "1"
    for lineno, l in enumerate(lines, 1):
        if fill and l.startswith("# run") and ("?" in l):
            # authoring aid: FILL=1 replaces a '?' value / location by the oracle's
            mf = re.match(r"^# run: @([A-Za-z_][A-Za-z0-9_.]*)\((.*)\) (==|~=) \?$", l)
            mef = re.match(r"^# run-error: @([A-Za-z_][A-Za-z0-9_.]*)\((.*)\) at \?: (.+)$", l)
            args = parse_list((mf or mef).group(2), funcs)
            if mf:
                v = funcs[mf.group(1)](*args)
                l = l[:-1] + fmt_value(v)
            else:
                try:
                    funcs[mef.group(1)](*args)
                    raise AssertionError("no error for " + l)
                except IRError as e:
                    el, ec = locate(lines, e.stmt)
                    l = l.replace("at ?:", "at %d:%d:" % (el, ec))
            lines[lineno - 1] = l
            open(path, "w").write("\n".join(lines))
            print("filled", l)
        m = RUN.match(l)
        me = ERR.match(l)
        if not (m or me):
            if l.startswith("# run"):
                print("MALFORMED %s:%d: %s" % (name, lineno, l))
                failures += 1
            continue
        n += 1
        fname, argtext = (m or me).group(1), (m or me).group(2)
        args = parse_list(argtext, funcs)
        try:
            got, err = funcs[fname](*args), None
        except IRError as e:
            got, err = None, e
        if m:
            want = parse_list(m.group(4), funcs)[0]
            ok = err is None and same(got, want, m.group(3) == "~=")
            if not ok:
                print("MISMATCH %s:%d: %s\n   oracle: %s" % (
                    name, lineno, l, ("error " + err.msg) if err else fmt_value(got)))
                failures += 1
        else:
            wl, wc, wt = int(me.group(3)), int(me.group(4)), me.group(5)
            if err is None:
                print("MISMATCH %s:%d: %s\n   oracle: no error, %s" % (name, lineno, l, fmt_value(got)))
                failures += 1
                continue
            el, ec = locate(lines, err.stmt)
            # the oracle's message is a paraphrase for fptosi; compare the key
            key_ok = wt in err.msg or (wt == "fptosi" and err.msg.startswith("fptosi"))
            if (el, ec) != (wl, wc) or not key_ok:
                print("MISMATCH %s:%d: %s\n   oracle: %s at %d:%d" % (name, lineno, l, err.msg, el, ec))
                failures += 1
    if n < 2:
        print("TOO FEW RUN LINES in", name)
        failures += 1
    if failures:
        sys.exit(1)
    print("OK", name, "(%d runs)" % n)
