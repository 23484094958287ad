#!/usr/bin/env python3
"""Writes a large valid IR module for measuring parse and verify time.

Usage: gen_big_ir.py MEGABYTES OUT.ir [--one-function]

By default the module is many small functions, each a loop with phis and a
call of the previous function; with --one-function it is a single function of
one block per loop body, chained, so that one function is huge.
"""
import sys


def small_func(i, out):
    callee = f"@f{i - 1}" if i > 0 else None
    out.append(f"func @f{i}(%x: f64, %n: i64) -> f64 {{\n#1:\n  goto #2\n#2:\n")
    out.append("  %i = phi [#1 => 0, #3 => %i1] :: i64\n")
    out.append("  %s = phi [#1 => %x, #3 => %s1] :: f64\n")
    out.append("  %c = call lt(%i, %n) :: bool\n  gotoifnot %c, #4\n#3:\n")
    out.append("  %t = call sin(%s) :: f64\n  %u = call mul(%t, 0.5) :: f64\n")
    out.append("  %s1 = call add(%s, %u) :: f64\n  %i1 = call iadd(%i, 1) :: i64\n  goto #2\n#4:\n")
    if callee:
        out.append(f"  %r = invoke {callee}(%s, 1) :: f64\n  return %r\n}}\n\n")
    else:
        out.append("  return %s\n}\n\n")


def one_func(target, out):
    out.append("func @big(%x: f64) -> f64 {\n#0:\n  goto #1\n")
    size, k = 0, 1
    prev = "%x"
    while size < target:
        chunk = (f"#{k}:\n  %a{k} = call mul({prev}, 0.999) :: f64\n"
                 f"  %b{k} = call add(%a{k}, 0.001) :: f64\n  goto #{k + 1}\n")
        out.append(chunk)
        size += len(chunk)
        prev = f"%b{k}"
        k += 1
    out.append(f"#{k}:\n  return {prev}\n}}\n")


def main():
    mb, path = float(sys.argv[1]), sys.argv[2]
    target = int(mb * 1_000_000)
    out = []
    if "--one-function" in sys.argv:
        one_func(target, out)
    else:
        size, i = 0, 0
        while size < target:
            before = len(out)
            small_func(i, out)
            size += sum(len(s) for s in out[before:])
            i += 1
    with open(path, "w") as fh:
        fh.write("".join(out))


if __name__ == "__main__":
    main()
