#!/usr/bin/env python3
"""A small, independent reference model of the irad IR (SYNTAX.md section 1),
used only to cross-check the filetests in ../programs/.

For every program it
  * parses the module, re-prints it in canonical form (types re-inferred, f64
    constants in shortest round-trip form) and requires the text to be
    identical to the file (so the irad printer should reproduce it);
  * verifies the structural rules (unique names, entry without predecessors,
    one phi entry per predecessor, gotoifnot successors differ, definitions
    dominate uses, no unreachable block, types of every statement);
  * interprets every `# run:` / `# run-error:` directive and compares the
    result (bitwise for `==`, 1e-12 relative / 1e-14 absolute for `~=`), and
    checks that an `==` run never used a libm function whose last bit may
    differ between math libraries.

The hand-written oracles (<name>.py) are the primary, independent check; this
model checks that the IR text really encodes the algorithm they implement.
"""
import math
import os
import re
import struct
import sys

CALL_DEPTH_LIMIT = 100000
I64_MIN = -(2 ** 63)
I64_MAX = 2 ** 63 - 1


def wrap(x):
    return ((x + 2 ** 63) % 2 ** 64) - 2 ** 63


# ----------------------------------------------------------------- formatting
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


def fmt_ty(t):
    k = t[0]
    if k in ("f64", "i64", "bool"):
        return k
    if k == "unit":
        return "()"
    if k == "tuple":
        inner = ", ".join(fmt_ty(e) for e in t[1])
        return "(" + inner + ("," if len(t[1]) == 1 else "") + ")"
    if k == "arr":
        return "[" + t[1] + "]"
    if k == "fn":
        return "fn(" + ", ".join(fmt_ty(p) for p in t[1]) + ") -> " + fmt_ty(t[2])
    raise ValueError(t)


F64 = ("f64",)
I64 = ("i64",)
BOOL = ("bool",)
UNIT = ("unit",)


# ----------------------------------------------------------------- tokenizer
TOK_RE = re.compile(
    r"""\s*(?:
      (?P<num>-?(?:inf|nan)\b|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)
    | (?P<val>%[A-Za-z0-9_.]+)
    | (?P<fun>@[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<blk>\#\d+)
    | (?P<ident>[A-Za-z_][A-Za-z0-9_.]*)
    | (?P<punct>=>|::|->|[()\[\],:=<>{}])
    )""",
    re.X,
)


def tokenize(s):
    toks = []
    pos = 0
    s = s.rstrip()
    while pos < len(s):
        m = TOK_RE.match(s, pos)
        if not m or m.end() == pos:
            raise SyntaxError("bad token at %r" % s[pos:])
        pos = m.end()
        for k in ("num", "val", "fun", "blk", "ident", "punct"):
            if m.group(k) is not None:
                toks.append((k, m.group(k)))
                break
    return toks


class P:
    def __init__(self, toks):
        self.t = toks
        self.i = 0

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else (None, None)

    def next(self):
        tok = self.peek()
        self.i += 1
        return tok

    def expect(self, text):
        k, v = self.next()
        if v != text:
            raise SyntaxError("expected %r, found %r" % (text, v))

    def at(self, text):
        return self.peek()[1] == text

    def done(self):
        return self.i >= len(self.t)


def parse_type(p):
    k, v = p.next()
    if v in ("f64", "i64", "bool"):
        return (v,)
    if v == "[":
        _, e = p.next()
        p.expect("]")
        assert e in ("f64", "i64", "bool")
        return ("arr", e)
    if v == "(":
        if p.at(")"):
            p.next()
            return UNIT
        elems = [parse_type(p)]
        while p.at(","):
            p.next()
            if p.at(")"):
                break
            elems.append(parse_type(p))
        p.expect(")")
        return ("tuple", tuple(elems))
    if v == "fn":
        p.expect("(")
        params = []
        if not p.at(")"):
            params.append(parse_type(p))
            while p.at(","):
                p.next()
                params.append(parse_type(p))
        p.expect(")")
        p.expect("->")
        return ("fn", tuple(params), parse_type(p))
    raise SyntaxError("bad type at %r" % v)


def num_const(text):
    """('f', x) or ('i', n) from a numeric literal."""
    if text in ("inf", "-inf", "nan", "-nan") or "." in text or "e" in text or "E" in text:
        return ("f", float(text))
    return ("i", int(text))


def parse_operand(p):
    k, v = p.next()
    if k == "num":
        c = num_const(v)
        return ("const", F64 if c[0] == "f" else I64, c[1])
    if k == "val":
        return ("val", v)
    if k == "fun":
        return ("fun", v)
    if v in ("true", "false"):
        return ("const", BOOL, v == "true")
    if v == "(":
        p.expect(")")
        return ("const", UNIT, ())
    raise SyntaxError("bad operand %r" % v)


def parse_args(p):
    p.expect("(")
    ops = []
    if not p.at(")"):
        ops.append(parse_operand(p))
        while p.at(","):
            p.next()
            ops.append(parse_operand(p))
    p.expect(")")
    return ops


# ----------------------------------------------------------------- module parse
class Stmt:
    def __init__(self, line, col):
        self.line = line
        self.col = col
        self.res = None
        self.ty = None  # annotation
        self.kind = None  # prim, invoke, dyn, phi
        self.name = None
        self.ops = []
        self.entries = []


class Block:
    def __init__(self, label, line):
        self.label = label
        self.line = line
        self.phis = []
        self.stmts = []
        self.term = None  # ('goto', b) ('gotoifnot', op, b) ('return', op), line, col


class Func:
    def __init__(self, name, params, ret, line):
        self.name = name
        self.params = params
        self.ret = ret
        self.line = line
        self.blocks = []


class Module:
    def __init__(self):
        self.funcs = {}
        self.order = []


def parse_module(lines, first, last):
    """lines: list of text lines; parse lines[first..last] inclusive (0-based)."""
    mod = Module()
    i = first
    cur = None
    blk = None
    while i <= last:
        raw = lines[i]
        lineno = i + 1
        i += 1
        if raw.strip() == "":
            continue
        if re.match(r"^\s*#[^0-9]", raw) or raw.strip() == "#":
            raise SyntaxError("%d: comment inside the module body (not canonical)" % lineno)
        if cur is None:
            m = re.match(r"^func (@[A-Za-z_][A-Za-z0-9_.]*)\((.*)\) -> (.*) \{$", raw)
            if not m:
                raise SyntaxError("%d: expected func header" % lineno)
            name, ptext, rtext = m.groups()
            params = []
            if ptext.strip():
                p = P(tokenize(ptext))
                while True:
                    k, v = p.next()
                    assert k == "val", (lineno, v)
                    p.expect(":")
                    params.append((v, parse_type(p)))
                    if p.done():
                        break
                    p.expect(",")
            rp = P(tokenize(rtext))
            ret = parse_type(rp)
            assert rp.done()
            cur = Func(name, params, ret, lineno)
            if name in mod.funcs:
                raise SyntaxError("duplicate function " + name)
            mod.funcs[name] = cur
            mod.order.append(name)
            blk = None
            continue
        if raw == "}":
            cur = None
            continue
        m = re.match(r"^#(\d+):$", raw)
        if m:
            blk = Block(int(m.group(1)), lineno)
            cur.blocks.append(blk)
            continue
        if blk is None or blk.term is not None:
            raise SyntaxError("%d: statement outside a block or after the terminator" % lineno)
        body = raw.lstrip()
        col = len(raw) - len(body) + 1
        p = P(tokenize(body))
        k, v = p.peek()
        if v == "goto":
            p.next()
            _, b = p.next()
            blk.term = ("goto", int(b[1:]), lineno, col)
            assert p.done()
            continue
        if v == "gotoifnot":
            p.next()
            op = parse_operand(p)
            p.expect(",")
            _, b = p.next()
            blk.term = ("gotoifnot", op, int(b[1:]), lineno, col)
            assert p.done()
            continue
        if v == "return":
            p.next()
            op = parse_operand(p)
            blk.term = ("return", op, lineno, col)
            assert p.done()
            continue
        st = Stmt(lineno, col)
        if k == "val":
            st.res = v
            p.next()
            p.expect("=")
        k, v = p.next()
        if v == "phi":
            st.kind = "phi"
            p.expect("[")
            while True:
                _, b = p.next()
                p.expect("=>")
                st.entries.append((int(b[1:]), parse_operand(p)))
                if p.at("]"):
                    p.next()
                    break
                p.expect(",")
            if blk.stmts:
                raise SyntaxError("%d: phi after a non-phi statement" % lineno)
        elif v == "call":
            k2, v2 = p.peek()
            if k2 == "val":
                p.next()
                st.kind = "dyn"
                st.name = v2
            else:
                p.next()
                st.kind = "prim"
                st.name = v2
            st.ops = parse_args(p)
        elif v == "invoke":
            _, g = p.next()
            st.kind = "invoke"
            st.name = g
            st.ops = parse_args(p)
        else:
            raise SyntaxError("%d: bad statement" % lineno)
        if p.at("::"):
            p.next()
            st.ty = parse_type(p)
        if not p.done():
            raise SyntaxError("%d: trailing text" % lineno)
        if st.kind == "phi":
            blk.phis.append(st)
        else:
            blk.stmts.append(st)
    if cur is not None:
        raise SyntaxError("unterminated function")
    return mod


# ----------------------------------------------------------------- primitives
F1 = ["neg", "abs", "sqrt", "exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin",
      "acos", "atan", "sinh", "cosh", "tanh", "erf", "floor", "ceil", "round"]
F2 = ["add", "sub", "mul", "div", "pow", "min", "max", "copysign", "atan2"]
I2 = ["iadd", "isub", "imul", "idiv", "irem"]
FIXED = {}
for n in F1:
    FIXED[n] = ((F64,), F64)
for n in F2:
    FIXED[n] = ((F64, F64), F64)
for n in I2:
    FIXED[n] = ((I64, I64), I64)
FIXED["ineg"] = ((I64,), I64)
FIXED["powi"] = ((F64, I64), F64)
FIXED["and"] = ((BOOL, BOOL), BOOL)
FIXED["or"] = ((BOOL, BOOL), BOOL)
FIXED["not"] = ((BOOL,), BOOL)
FIXED["sitofp"] = ((I64,), F64)
FIXED["fptosi"] = ((F64,), I64)

# functions whose results may differ in the last bit between math libraries
INEXACT = {"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos", "atan",
           "sinh", "cosh", "tanh", "erf", "pow", "powi", "atan2"}


class RunError(Exception):
    def __init__(self, msg, stmt=None):
        Exception.__init__(self, msg)
        self.msg = msg
        self.stmt = stmt


def _libm1(fn):
    def g(x):
        try:
            return fn(x)
        except ValueError:
            return math.nan
        except OverflowError:
            return math.inf
    return g


def f_round(x):
    if math.isnan(x) or math.isinf(x):
        return x
    a = abs(x)
    f = math.floor(a)
    r = f + 1.0 if a - f >= 0.5 else f
    return math.copysign(r, x)


def f_min(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


def f_max(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b:
        return a if math.copysign(1.0, a) > 0 else b
    return a if a > b else b


def f_div(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        if math.isnan(a) or a == 0.0:
            return math.nan
        s = math.copysign(1.0, a) * math.copysign(1.0, b)
        return math.inf if s > 0 else -math.inf


def f_pow(a, b):
    try:
        return math.pow(a, b)
    except ValueError:
        return math.nan
    except OverflowError:
        return math.inf


def f_log(x):
    if x == 0.0:
        return -math.inf
    if x < 0 or math.isnan(x):
        return math.nan
    return math.log(x)


def f_exp(x):
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def trunc_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def trunc_rem(a, b):
    return a - b * trunc_div(a, b)


SCALAR_IMPL = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": f_div,
    "neg": lambda a: -a,
    "pow": f_pow,
    "powi": lambda a, n: f_pow(a, float(n)),
    "abs": abs,
    "min": f_min,
    "max": f_max,
    "copysign": math.copysign,
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else (x if x == 0 else math.nan),
    "exp": f_exp,
    "log": f_log,
    "log1p": _libm1(math.log1p),
    "expm1": _libm1(math.expm1),
    "sin": _libm1(math.sin),
    "cos": _libm1(math.cos),
    "tan": _libm1(math.tan),
    "asin": _libm1(math.asin),
    "acos": _libm1(math.acos),
    "atan": math.atan,
    "atan2": math.atan2,
    "sinh": _libm1(math.sinh),
    "cosh": _libm1(math.cosh),
    "tanh": math.tanh,
    "erf": math.erf,
    "floor": lambda x: x if (math.isnan(x) or math.isinf(x)) else math.copysign(float(math.floor(x)), x),
    "ceil": lambda x: x if (math.isnan(x) or math.isinf(x)) else math.copysign(float(math.ceil(x)), x),
    "round": f_round,
    "iadd": lambda a, b: wrap(a + b),
    "isub": lambda a, b: wrap(a - b),
    "imul": lambda a, b: wrap(a * b),
    "ineg": lambda a: wrap(-a),
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
    "not": lambda a: not a,
    "sitofp": lambda n: float(n),
}


def i_div(a, b):
    if b == 0:
        raise RunError("division by zero")
    if a == I64_MIN and b == -1:
        raise RunError("integer overflow in idiv")
    return trunc_div(a, b)


def i_rem(a, b):
    if b == 0:
        raise RunError("remainder by zero")
    if a == I64_MIN and b == -1:
        return 0
    return trunc_rem(a, b)


def fptosi(x):
    if math.isnan(x) or x >= 2.0 ** 63 or x < -(2.0 ** 63):
        raise RunError("fptosi of %s out of the i64 range" % fmt_f64(x))
    return int(x)


SCALAR_IMPL["idiv"] = i_div
SCALAR_IMPL["irem"] = i_rem
SCALAR_IMPL["fptosi"] = fptosi


# ----------------------------------------------------------------- checking
class Checker:
    def __init__(self, mod):
        self.mod = mod
        self.errors = []

    def err(self, f, msg):
        self.errors.append("%s: %s" % (f.name, msg))

    def op_type(self, f, env, op):
        if op[0] == "const":
            return op[1]
        if op[0] == "val":
            if op[1] not in env:
                self.err(f, "unknown value " + op[1])
                return None
            return env[op[1]]
        if op[0] == "fun":
            name = op[1]
            if name in self.mod.funcs:
                g = self.mod.funcs[name]
                return ("fn", tuple(t for _, t in g.params), g.ret)
            prim = name[1:]
            if prim in FIXED:
                ps, r = FIXED[prim]
                return ("fn", tuple(ps), r)
            self.err(f, "unknown function value " + name)
            return None
        raise ValueError(op)

    def prim_type(self, f, st, tys):
        n = st.name
        if n in FIXED:
            ps, r = FIXED[n]
            if tuple(tys) != tuple(ps):
                self.err(f, "line %d: bad args for %s: %s" % (st.line, n, tys))
            return r
        if n in ("lt", "le", "gt", "ge", "eq", "ne"):
            ok = tys[0] in (F64, I64) or (n in ("eq", "ne") and tys[0] == BOOL)
            if len(tys) != 2 or not ok or tys[0] != tys[1]:
                self.err(f, "line %d: bad compare" % st.line)
            return BOOL
        if n == "select":
            if len(tys) != 3 or tys[0] != BOOL or tys[1] != tys[2]:
                self.err(f, "line %d: bad select" % st.line)
            return tys[1]
        if n == "tuple":
            return ("tuple", tuple(tys)) if tys else UNIT
        if n == "getfield":
            if tys[0][0] != "tuple" or st.ops[1][0] != "const" or st.ops[1][1] != I64:
                self.err(f, "line %d: bad getfield" % st.line)
                return None
            return tys[0][1][st.ops[1][2]]
        if n == "alloc":
            if tys != [I64] or st.ty is None or st.ty[0] != "arr":
                self.err(f, "line %d: bad alloc" % st.line)
            return st.ty
        if n == "zeros":
            if tys != [I64]:
                self.err(f, "line %d: bad zeros" % st.line)
            return ("arr", "f64")
        if n == "length":
            if len(tys) != 1 or tys[0][0] != "arr":
                self.err(f, "line %d: bad length" % st.line)
            return I64
        if n == "copy":
            if len(tys) != 1 or tys[0][0] != "arr":
                self.err(f, "line %d: bad copy" % st.line)
            return tys[0]
        if n == "same":
            if len(tys) != 2 or tys[0][0] != "arr" or tys[1] != tys[0]:
                self.err(f, "line %d: bad same" % st.line)
            return BOOL
        if n == "arrayref":
            if len(tys) != 2 or tys[0][0] != "arr" or tys[1] != I64:
                self.err(f, "line %d: bad arrayref" % st.line)
                return None
            return (tys[0][1],)
        if n == "arrayset":
            if len(tys) != 3 or tys[0][0] != "arr" or tys[1] != I64 or tys[2] != (tys[0][1],):
                self.err(f, "line %d: bad arrayset" % st.line)
            return UNIT
        self.err(f, "line %d: unknown primitive %s" % (st.line, n))
        return None

    def check_func(self, f):
        labels = [b.label for b in f.blocks]
        if len(set(labels)) != len(labels):
            self.err(f, "duplicate block labels")
        bmap = {b.label: b for b in f.blocks}
        succ = {}
        for idx, b in enumerate(f.blocks):
            t = b.term
            if t is None:
                self.err(f, "block #%d has no terminator" % b.label)
                succ[b.label] = []
                continue
            if t[0] == "goto":
                succ[b.label] = [t[1]]
            elif t[0] == "gotoifnot":
                if idx + 1 >= len(f.blocks):
                    self.err(f, "gotoifnot in the last block")
                    succ[b.label] = [t[2]]
                else:
                    nxt = f.blocks[idx + 1].label
                    if nxt == t[2]:
                        self.err(f, "gotoifnot successors coincide in #%d" % b.label)
                    succ[b.label] = [t[2], nxt]
            else:
                succ[b.label] = []
            for s in succ[b.label]:
                if s not in bmap:
                    self.err(f, "jump to unknown block #%d" % s)
        preds = {l: [] for l in labels}
        for l in labels:
            for s in succ[l]:
                if s in preds and l not in preds[s]:
                    preds[s].append(l)
        entry = labels[0]
        if preds[entry]:
            self.err(f, "entry block has predecessors")
        # reachability
        seen = set()
        stack = [entry]
        while stack:
            l = stack.pop()
            if l in seen:
                continue
            seen.add(l)
            stack.extend(succ[l])
        if seen != set(labels):
            self.err(f, "unreachable blocks %s" % (set(labels) - seen))
        # dominators (iterative)
        dom = {l: set(labels) for l in labels}
        dom[entry] = {entry}
        changed = True
        while changed:
            changed = False
            for l in labels:
                if l == entry:
                    continue
                ps = [p for p in preds[l] if p in seen]
                new = set(labels)
                for p in ps:
                    new &= dom[p]
                new |= {l}
                if new != dom[l]:
                    dom[l] = new
                    changed = True
        # definitions
        defs = {}
        names = set()
        for pn, _ in f.params:
            if pn in names:
                self.err(f, "duplicate name " + pn)
            names.add(pn)
            defs[pn] = (None, -1)
        env = dict(f.params)
        for b in f.blocks:
            for pos, st in enumerate(b.phis + b.stmts):
                if st.res is not None:
                    if st.res in names:
                        self.err(f, "duplicate name " + st.res)
                    names.add(st.res)
                    defs[st.res] = (b.label, pos)
                    env[st.res] = st.ty

        def dominates_use(v, blabel, pos):
            if v not in defs:
                return False
            db, dp = defs[v]
            if db is None:
                return True
            if db == blabel:
                return dp < pos
            return db in dom[blabel]

        def check_use(op, blabel, pos, where):
            if op[0] == "val" and not dominates_use(op[1], blabel, pos):
                self.err(f, "%s: use of %s not dominated by its definition" % (where, op[1]))

        for b in f.blocks:
            # phis
            entries_seen = []
            for st in b.phis:
                if st.res is None or st.ty is None:
                    self.err(f, "line %d: phi without result/type" % st.line)
                bs = [e[0] for e in st.entries]
                if sorted(bs) != sorted(preds[b.label]) or len(set(bs)) != len(bs):
                    self.err(f, "line %d: phi entries %s but preds %s" % (st.line, bs, preds[b.label]))
                for pb, op in st.entries:
                    if pb in bmap:
                        check_use(op, pb, 10 ** 9, "line %d" % st.line)
                    t = self.op_type(f, env, op)
                    if t != st.ty:
                        self.err(f, "line %d: phi entry type %s != %s" % (st.line, t, st.ty))
            npos = len(b.phis)
            for k, st in enumerate(b.stmts):
                pos = npos + k
                for op in st.ops:
                    check_use(op, b.label, pos, "line %d" % st.line)
                tys = [self.op_type(f, env, op) for op in st.ops]
                if st.kind == "prim":
                    rt = self.prim_type(f, st, tys)
                elif st.kind == "invoke":
                    g = self.mod.funcs.get(st.name)
                    if g is None:
                        self.err(f, "line %d: unknown function %s" % (st.line, st.name))
                        rt = None
                    else:
                        if tuple(tys) != tuple(t for _, t in g.params):
                            self.err(f, "line %d: bad args to %s" % (st.line, st.name))
                        rt = g.ret
                else:  # dyn
                    check_use(("val", st.name), b.label, pos, "line %d" % st.line)
                    ft = env.get(st.name)
                    if ft is None or ft[0] != "fn" or tuple(tys) != ft[1]:
                        self.err(f, "line %d: bad dynamic call" % st.line)
                        rt = None
                    else:
                        rt = ft[2]
                if st.res is None:
                    if rt != UNIT:
                        self.err(f, "line %d: result of type %s dropped" % (st.line, rt))
                    if st.ty is not None:
                        self.err(f, "line %d: annotation on a unit statement" % st.line)
                else:
                    if rt == UNIT:
                        self.err(f, "line %d: unit result bound to a name (not canonical)" % st.line)
                    if st.ty != rt:
                        self.err(f, "line %d: annotation %s but inferred %s" % (st.line, st.ty, rt))
            t = b.term
            if t and t[0] == "gotoifnot":
                check_use(t[1], b.label, 10 ** 9, "line %d" % t[3])
                if self.op_type(f, env, t[1]) != BOOL:
                    self.err(f, "line %d: gotoifnot on non-bool" % t[3])
            if t and t[0] == "return":
                check_use(t[1], b.label, 10 ** 9, "line %d" % t[2])
                if self.op_type(f, env, t[1]) != f.ret:
                    self.err(f, "line %d: return type mismatch" % t[2])

    def check(self):
        for n in self.mod.order:
            self.check_func(self.mod.funcs[n])
        return self.errors


# ----------------------------------------------------------------- printing
def fmt_op(op):
    if op[0] == "const":
        t, v = op[1], op[2]
        if t == F64:
            return fmt_f64(v)
        if t == I64:
            return str(v)
        if t == BOOL:
            return "true" if v else "false"
        return "()"
    return op[1]


def print_module(mod):
    out = []
    for n in mod.order:
        f = mod.funcs[n]
        if out:
            out.append("")
        ps = ", ".join("%s: %s" % (pn, fmt_ty(t)) for pn, t in f.params)
        out.append("func %s(%s) -> %s {" % (f.name, ps, fmt_ty(f.ret)))
        for b in f.blocks:
            out.append("#%d:" % b.label)
            for st in b.phis:
                ents = ", ".join("#%d => %s" % (pb, fmt_op(op)) for pb, op in st.entries)
                out.append("  %s = phi [%s] :: %s" % (st.res, ents, fmt_ty(st.ty)))
            for st in b.stmts:
                callee = {"prim": "call " + st.name, "dyn": "call " + st.name,
                          "invoke": "invoke " + st.name}[st.kind]
                s = "%s(%s)" % (callee, ", ".join(fmt_op(o) for o in st.ops))
                if st.res is not None:
                    s = "%s = %s :: %s" % (st.res, s, fmt_ty(st.ty))
                out.append("  " + s)
            t = b.term
            if t[0] == "goto":
                out.append("  goto #%d" % t[1])
            elif t[0] == "gotoifnot":
                out.append("  gotoifnot %s, #%d" % (fmt_op(t[1]), t[2]))
            else:
                out.append("  return %s" % fmt_op(t[1]))
        out.append("}")
    return out


# ----------------------------------------------------------------- interpreter
class FnVal:
    def __init__(self, name):
        self.name = name  # '@g' (module function or primitive)

    def __repr__(self):
        return self.name


class Interp:
    def __init__(self, mod, depth_limit=CALL_DEPTH_LIMIT):
        self.mod = mod
        self.limit = depth_limit
        self.inexact = False

    def prim(self, st, name, args):
        if name in INEXACT:
            self.inexact = True
        if name in SCALAR_IMPL:
            return SCALAR_IMPL[name](*args)
        if name in ("lt", "le", "gt", "ge", "eq", "ne"):
            a, b = args
            return {"lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                    "eq": a == b, "ne": a != b}[name]
        if name == "select":
            return args[1] if args[0] else args[2]
        if name == "tuple":
            return tuple(args) if args else ()
        if name == "getfield":
            return args[0][args[1]]
        if name in ("alloc", "zeros"):
            n = args[0]
            if n < 0:
                raise RunError("negative array length %d" % n)
            if name == "zeros":
                return [0.0] * n
            e = st.ty[1]
            return [{"f64": 0.0, "i64": 0, "bool": False}[e]] * n
        if name == "length":
            return len(args[0])
        if name in ("arrayref", "arrayset"):
            a, i = args[0], args[1]
            if i < 0 or i >= len(a):
                raise RunError("index %d out of bounds for array of length %d" % (i, len(a)))
            if name == "arrayref":
                return a[i]
            a[i] = args[2]
            return ()
        if name == "copy":
            return list(args[0])
        if name == "same":
            # One array (one list), or both empty.
            return args[0] is args[1] or (len(args[0]) == 0 and len(args[1]) == 0)
        raise RunError("unknown primitive " + name)

    def run(self, fname, args):
        mod = self.mod
        f = mod.funcs[fname]
        # frame: [func, env, block_index, stmt_index, dest]
        stack = []

        def enter(func, argvals, dest):
            if len(stack) + 1 > self.limit:
                raise RunError("call depth limit of %d exceeded" % self.limit)
            env = {}
            for (pn, _), v in zip(func.params, argvals):
                env[pn] = v
            stack.append([func, env, 0, 0, dest])
            self.enter_block(stack[-1], 0, None)

        enter(f, args, None)
        result = None
        steps = 0
        while stack:
            steps += 1
            if steps > 50000000:
                raise RuntimeError("step limit exceeded")
            fr = stack[-1]
            func, env, bi, si, _ = fr
            b = func.blocks[bi]
            if si < len(b.stmts):
                st = b.stmts[si]
                fr[3] += 1
                try:
                    vals = [self.val(env, op) for op in st.ops]
                    if st.kind == "prim":
                        r = self.prim(st, st.name, vals)
                    else:
                        if st.kind == "invoke":
                            target = st.name
                        else:
                            target = env[st.name].name
                        if target in mod.funcs:
                            enter(mod.funcs[target], vals, st.res)
                            continue
                        r = self.prim(st, target[1:], vals)
                except RunError as e:
                    if e.stmt is None:
                        e.stmt = st
                    raise
                if st.res is not None:
                    env[st.res] = r
                continue
            t = b.term
            if t[0] == "goto":
                self.jump(fr, t[1])
            elif t[0] == "gotoifnot":
                c = self.val(env, t[1])
                if not c:
                    self.jump(fr, t[2])
                else:
                    self.enter_block(fr, bi + 1, b.label)
            else:
                v = self.val(env, t[1])
                stack.pop()
                if stack:
                    dest = fr[4]
                    if dest is not None:
                        stack[-1][1][dest] = v
                else:
                    result = v
        return result

    def jump(self, fr, label):
        func = fr[0]
        prev = func.blocks[fr[2]].label
        for i, b in enumerate(func.blocks):
            if b.label == label:
                self.enter_block(fr, i, prev)
                return
        raise RuntimeError("bad jump")

    def enter_block(self, fr, bi, prev):
        func, env = fr[0], fr[1]
        b = func.blocks[bi]
        fr[2] = bi
        fr[3] = 0
        if b.phis:
            new = {}
            for st in b.phis:
                for pb, op in st.entries:
                    if pb == prev:
                        new[st.res] = self.val(env, op)
                        break
                else:
                    raise RuntimeError("phi without entry for #%s" % prev)
            env.update(new)

    def val(self, env, op):
        if op[0] == "const":
            return op[2]
        if op[0] == "val":
            return env[op[1]]
        return FnVal(op[1])


# ----------------------------------------------------------------- literals
def parse_literal(p):
    k, v = p.next()
    if k == "num":
        c = num_const(v)
        return c[1]
    if v in ("true", "false"):
        return v == "true"
    if k == "fun":
        return FnVal(v)
    if v == "[":
        items = []
        if not p.at("]"):
            items.append(parse_literal(p))
            while p.at(","):
                p.next()
                items.append(parse_literal(p))
        p.expect("]")
        return items
    if v == "(":
        items = []
        if not p.at(")"):
            items.append(parse_literal(p))
            while p.at(","):
                p.next()
                items.append(parse_literal(p))
        p.expect(")")
        return tuple(items)
    raise SyntaxError("bad literal %r" % v)


def parse_literal_list(text):
    p = P(tokenize(text))
    out = []
    if p.done():
        return out
    out.append(parse_literal(p))
    while p.at(","):
        p.next()
        out.append(parse_literal(p))
    if not p.done():
        raise SyntaxError("trailing text in %r" % text)
    return out


def same(a, b, approx):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if approx:
            if math.isinf(a) or math.isinf(b):
                return a == b
            return abs(a - b) <= max(1e-14, 1e-12 * abs(b))
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return (isinstance(a, list) == isinstance(b, list) and len(a) == len(b)
                and all(same(x, y, approx) for x, y in zip(a, b)))
    return False


RUN_RE = re.compile(r"^# run: (@[A-Za-z_][A-Za-z0-9_.]*)\((.*)\) (==|~=) (.+)$")
ERR_RE = re.compile(r"^# run-error: (@[A-Za-z_][A-Za-z0-9_.]*)\((.*)\) at (\d+):(\d+): (.+)$")


def split_file(text):
    lines = text.split("\n")
    if not text.endswith("\n") or text.endswith("\n\n"):
        raise SyntaxError("file must end with exactly one newline")
    lines = lines[:-1]
    first = next(i for i, l in enumerate(lines) if l.startswith("func "))
    last = max(i for i, l in enumerate(lines) if l == "}")
    for i in list(range(0, first)) + list(range(last + 1, len(lines))):
        if not lines[i].startswith("# "):
            raise SyntaxError("line %d: only '# ' comments before the first func / after the last }" % (i + 1))
    return lines, first, last


def check_file(path, verbose=False):
    text = open(path).read()
    lines, first, last = split_file(text)
    if not any(l.startswith("# ") and not l.startswith("# run") for l in lines[:first]):
        raise SyntaxError("missing description comment")
    mod = parse_module(lines, first, last)
    errs = Checker(mod).check()
    printed = print_module(mod)
    body = lines[first:last + 1]
    if printed != body:
        for i, (a, b) in enumerate(zip(printed, body)):
            if a != b:
                errs.append("not canonical at line %d:\n  file:    %r\n  printed: %r" % (first + i + 1, b, a))
                break
        else:
            errs.append("not canonical (length differs)")
    if errs:
        return errs
    nruns = 0
    for i, l in enumerate(lines):
        if not l.startswith("# run"):
            continue
        nruns += 1
        m = RUN_RE.match(l)
        me = ERR_RE.match(l)
        if not m and not me:
            errs.append("line %d: malformed directive" % (i + 1))
            continue
        fname, argtext = (m or me).group(1), (m or me).group(2)
        if fname not in mod.funcs:
            errs.append("line %d: unknown function %s" % (i + 1, fname))
            continue
        args = parse_literal_list(argtext)
        func = mod.funcs[fname]
        if len(args) != len(func.params):
            errs.append("line %d: arity" % (i + 1))
            continue
        it = Interp(mod)
        try:
            got = it.run(fname, args)
            err = None
        except RunError as e:
            got = None
            err = e
        if m:
            want = parse_literal_list(m.group(4))
            if len(want) != 1:
                errs.append("line %d: expected one value" % (i + 1))
                continue
            want = want[0]
            if err is not None:
                errs.append("line %d: run failed: %s at %d:%d" % (i + 1, err.msg, err.stmt.line, err.stmt.col))
                continue
            approx = m.group(3) == "~="
            if not same(got, want, approx):
                errs.append("line %d: got %r want %r" % (i + 1, got, want))
            if not approx and it.inexact:
                errs.append("line %d: '==' but the run used a libm function" % (i + 1))
            if approx and not it.inexact:
                errs.append("line %d: '~=' although the run is exact (use ==)" % (i + 1))
        else:
            wl, wc, wt = int(me.group(3)), int(me.group(4)), me.group(5)
            if err is None:
                errs.append("line %d: expected an error, got %r" % (i + 1, got))
                continue
            if (err.stmt.line, err.stmt.col) != (wl, wc) or wt not in err.msg:
                errs.append("line %d: got error %r at %d:%d" % (i + 1, err.msg, err.stmt.line, err.stmt.col))
        if verbose:
            print("   ", l, "->", "error " + err.msg if err else got)
    if nruns < 2:
        errs.append("fewer than 2 run lines")
    return errs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    progs = os.path.join(here, "..", "programs")
    files = sys.argv[1:] or sorted(
        os.path.join(progs, f) for f in os.listdir(progs) if f.endswith(".ir"))
    bad = 0
    verbose = os.environ.get("VERBOSE") == "1"
    for path in files:
        try:
            errs = check_file(path, verbose)
        except Exception as e:  # noqa
            errs = ["exception: %r" % (e,)]
        name = os.path.basename(path)
        if errs:
            bad += 1
            print("FAIL irsim", name)
            for e in errs:
                print("   ", e)
        else:
            print("ok   irsim", name)
    if bad:
        print("%d file(s) failed" % bad)
        sys.exit(1)


if __name__ == "__main__":
    sys.setrecursionlimit(10000)
    main()
