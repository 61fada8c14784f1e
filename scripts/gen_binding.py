#!/usr/bin/python3
"""Writes python/sluice/_constants.py from include/sluice.h.

Usage: gen_binding.py [--check] [SOURCE_DIR]

The Python binding names the header's integer constants (error codes,
dtypes, flags, option and stat keys) instead of repeating their values.
This reads every enum value and every object-like `#define SL_*` of the
header, in order, and evaluates each as C would: implicit enum values count
on from the one before, `1u << 3` and names defined earlier work, and the
error enum is expanded from its X-macro list. Anything it cannot read is an
error naming the line, not a constant left out: a new kind of declaration
needs this script taught, or an entry in NOT_INTEGERS saying why it is not
a number.

--check writes nothing: it exits 1, showing the difference, when the
checked-in module is not what the header gives (the check_binding test).
"""

import ast
import difflib
import os
import re
import sys

HEADER = "include/sluice.h"
OUTPUT = "python/sluice/_constants.py"

# Object-like SL_ macros that are not integer constants, and why.
NOT_INTEGERS = {
    "SL_API": "the export attribute",
    "SL_CACHE_AUTO": "a pointer value, ((const char *)-1)",
}


class ParseError(Exception):
    pass


def logical_lines(text):
    """(line number, text) of each logical line: comments blanked (their
    newlines kept), backslash continuations joined."""
    def blank(m):
        s = m.group(0)
        return s if s.startswith('"') else re.sub(r"[^\n]", " ", s)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"|/\*.*?\*/|//[^\n]*', blank, text, flags=re.S)
    start, parts = None, []
    for number, line in enumerate(text.split("\n"), 1):
        start = number if start is None else start
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts)
        start, parts = None, []


def split_args(text, i, where):
    """The comma-separated arguments of the call whose "(" is at text[i],
    and the index after its ")"."""
    depth, args, cur = 0, [], ""
    for m in re.finditer(r'"(?:\\.|[^"\\])*"|[(),]|[^(),"]+', text[i:]):
        tok = m.group(0)
        if tok == "(":
            depth += 1
            if depth == 1:
                continue
        elif tok == ")":
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args, i + m.end()
        elif tok == "," and depth == 1:
            args.append(cur.strip())
            cur = ""
            continue
        cur += tok
    raise ParseError("%s: unbalanced parentheses" % where)


def expand(text, functions, where, depth=0):
    """text with the function-like macros in `functions` expanded: the
    parameters substituted, ## pasted, the result expanded again."""
    if depth > 16:
        raise ParseError("%s: macro expansion does not end" % where)
    out, pos = "", 0
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        if m.start() < pos or m.group(1) not in functions:
            continue
        params, body = functions[m.group(1)]
        args, end = split_args(text, m.end() - 1, where)
        if len(args) != len(params):
            raise ParseError("%s: %s takes %d arguments, given %d"
                             % (where, m.group(1), len(params), len(args)))
        values = dict(zip(params, args))
        body = re.sub(r"\b[A-Za-z_]\w*\b", lambda p: values.get(p.group(0), p.group(0)), body)
        body = re.sub(r"\s*##\s*", "", body)
        out += text[pos:m.start()] + " " + expand(body, functions, where, depth + 1) + " "
        pos = end
    return out + text[pos:]


_BINARY = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
           ast.Mult: lambda a, b: a * b, ast.LShift: lambda a, b: a << b,
           ast.RShift: lambda a, b: a >> b, ast.BitOr: lambda a, b: a | b,
           ast.BitAnd: lambda a, b: a & b, ast.BitXor: lambda a, b: a ^ b}


def _literal(m):
    digits = m.group(1)
    if re.fullmatch(r"0[0-7]+", digits):
        return str(int(digits, 8))
    return str(int(digits, 0))


def evaluate(expr, known, where):
    """The value of a C integer constant expression over `known` names."""

    def value(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in known:
                raise ParseError("%s: %s is not a constant defined above" % (where, node.id))
            return known[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = value(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        raise ParseError("%s: cannot evaluate %r as an integer" % (where, expr.strip()))

    try:
        py = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", _literal, expr.strip())
        tree = ast.parse(py, mode="eval")
    except (SyntaxError, ValueError):
        raise ParseError("%s: cannot evaluate %r as an integer" % (where, expr.strip())) from None
    return value(tree.body)


class Header:
    def __init__(self):
        self.values = {}     # name -> value, for references
        self.groups = []     # (title, [(name, value)]) in header order
        self.functions = {}  # function-like macros: name -> (params, body)
        self.seen_not_integers = set()

    def define(self, name, value, title, where):
        if name in self.values and self.values[name] != value:
            raise ParseError("%s: %s defined again with another value (%d, was %d)"
                             % (where, name, value, self.values[name]))
        if name in self.values:
            return
        self.values[name] = value
        if not self.groups or self.groups[-1][0] != title:
            self.groups.append((title, []))
        self.groups[-1][1].append((name, value))

    def directive(self, line, where):
        m = re.match(r"\s*#\s*undef\s+(\w+)", line)
        if m:
            self.functions.pop(m.group(1), None)
            return
        m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)", line)
        if not m:
            return  # #if, #include...: every constant counts, in any tier
        name, params, body = m.group(1), m.group(3), m.group(4).strip()
        if params is not None:
            self.functions[name] = ([p.strip() for p in params.split(",")], body)
        elif name in NOT_INTEGERS:
            self.seen_not_integers.add(name)
        elif name.startswith("SL_") and not name.startswith("SL__"):
            self.define(name, evaluate(body, self.values, where), "#define SL_*", where)

    def enum(self, tag, body, where):
        value = -1
        for item in (x.strip() for x in body.split(",")):
            if not item:
                continue
            m = re.fullmatch(r"(SL_\w+)\s*(?:=\s*(.+))?", item, re.S)
            if not m:
                raise ParseError("%s: enum %s: cannot read %r" % (where, tag, item))
            value = evaluate(m.group(2), self.values, where) if m.group(2) else value + 1
            self.define(m.group(1), value, "enum " + tag, where)


_ENUM = re.compile(r"\benum\b\s*(\w*)\s*\{([^{}]*)\}")


def parse(text):
    h = Header()
    pending, start = "", 0  # C text from a line holding "enum" until its "}"
    for number, line in logical_lines(text):
        where = "%s:%d" % (HEADER, number)
        if line.lstrip().startswith("#"):
            h.directive(line, where)
            continue
        if not pending and not re.search(r"\benum\b", line):
            continue
        start = start if pending else number
        pending += " " + expand(line, h.functions, where)
        while True:
            m = _ENUM.search(pending)
            if not m:
                break
            h.enum(m.group(1) or "(anonymous)", m.group(2), "%s:%d" % (HEADER, start))
            pending = pending[m.end():]
        if not re.search(r"\benum\b", pending):
            pending = ""
        elif re.search(r"\benum\b\s*\w*\s*[^\s\w{]", pending):
            raise ParseError("%s:%d: an enum this script cannot read" % (HEADER, start))
    if pending:
        raise ParseError("%s:%d: an enum that never closes" % (HEADER, start))
    stale = set(NOT_INTEGERS) - h.seen_not_integers
    if stale:
        raise ParseError("NOT_INTEGERS names macros the header no longer defines: %s"
                         % ", ".join(sorted(stale)))
    return h


def module_text(h):
    lines = [
        '"""The integer constants of include/sluice.h, by their C names.',
        "",
        "Generated by scripts/gen_binding.py from include/sluice.h: do not edit.",
        "After changing the header, run `cmake --build BUILD --target python_binding`",
        "(or the script); the check_binding test fails while the two disagree.",
        '"""',
    ]
    for title, items in h.groups:
        lines += ["", "# " + title]
        lines += ["%s = %d" % item for item in items]
    return "\n".join(lines) + "\n"


def main(argv):
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        sys.exit("usage: gen_binding.py [--check] [SOURCE_DIR]")
    root = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    with open(os.path.join(root, HEADER), encoding="utf-8") as f:
        try:
            h = parse(f.read())
        except ParseError as e:
            sys.exit("gen_binding: %s" % e)
    text = module_text(h)
    path = os.path.join(root, OUTPUT)
    if not check:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return 0
    try:
        with open(path, encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    if old == text:
        print("check_binding: %s matches %s (%d constants)"
              % (OUTPUT, HEADER, len(h.values)))
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                               OUTPUT, "from " + HEADER))
    print("check_binding: %s is not what %s gives; run scripts/gen_binding.py"
          % (OUTPUT, HEADER))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
