#!/usr/bin/python3
"""Writes what the Python binding mirrors of include/sluice.h.

Usage: gen_binding.py [--check] [SOURCE_DIR]

python/sluice/_constants.py: the header's integer constants (error codes,
dtypes, flags, option and stat keys), so the binding names them instead of
repeating their values. This reads every enum value and every object-like
`#define SL_*` of the header, in order, and evaluates each as C would:
implicit enum values count on from the one before, `1u << 3` and names
defined earlier work, and the error enum is expanded from its X-macro list.
Anything it cannot read is an error naming the line, not a constant left
out: a new kind of declaration needs this script taught, or an entry in
NOT_INTEGERS saying why it is not a number. (Macros are gone once the
header is preprocessed, so this part reads the header's text.)

python/sluice/_header.py: the header's types and functions as ctypes
declares them: a Structure for every struct with a body, a CFUNCTYPE for
every typedef of a function pointer, and (restype, argtypes) for every
function, stable and SLUICE_EXPERIMENTAL apart. These come from the header
preprocessed by the C compiler ($CC, else cc) and parsed by pycparser
(python3-pycparser), never from patterns over its text. What ctypes
cannot call (varargs, structs by value, inline functions: STYLE.md rule
6) or this script does not know (unions, bit-fields, a type from a system
header missing from LIBC_TYPES) is an error naming the header line.

--check writes nothing: it exits 1, showing the difference, when a
checked-in module is not what the header gives (the check_binding test),
and 77 (skipped) when pycparser is missing and the constants match.
"""

import ast
import difflib
import importlib.util
import os
import re
import shlex
import subprocess
import sys
import tempfile

HEADER = "include/sluice.h"
CONSTANTS = "python/sluice/_constants.py"

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


def parse_constants(text):
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


def constants_text(h):
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


# ---- Declarations: the header's types and functions, as ctypes ----------
#
# These come from the preprocessed header, parsed by pycparser: a C parser,
# so a declaration is read as the compiler reads it (declarators, const,
# arrays of arrays, function pointers) and not guessed at by patterns.

# The C library's typedefs the header may use, and their ctypes. The header
# is preprocessed against empty stand-ins for the system headers below,
# with these typedefs ahead of it (pycparser cannot parse glibc's headers),
# so a type the header takes from elsewhere is a parse error naming it,
# never a guess. None: a type used only behind a pointer (c_void_p).
LIBC_TYPES = {
    "size_t": "c_size_t", "ptrdiff_t": "c_ssize_t",
    "int8_t": "c_int8", "int16_t": "c_int16", "int32_t": "c_int32", "int64_t": "c_int64",
    "uint8_t": "c_uint8", "uint16_t": "c_uint16", "uint32_t": "c_uint32",
    "uint64_t": "c_uint64", "FILE": None,
}
SYSTEM_HEADERS = ("stdbool.h", "stddef.h", "stdint.h", "stdio.h")

# Plain C types, by their keywords as Declarations._named orders them:
# "unsigned" first, "signed" only before char, "int" only alone.
BASIC_TYPES = {
    "void": None, "_Bool": "c_bool", "float": "c_float", "double": "c_double",
    "char": "c_char", "signed char": "c_byte", "unsigned char": "c_ubyte",
    "short": "c_short", "unsigned short": "c_ushort", "int": "c_int", "unsigned": "c_uint",
    "long": "c_long", "unsigned long": "c_ulong",
    "long long": "c_longlong", "unsigned long long": "c_ulonglong",
}

# Functions whose `const char *` result is not a NUL-terminated string, and
# why: ctypes would cut a c_char_p at the first NUL, so these stay pointers.
NOT_C_STRINGS = {
    "sl_tensor_string": "an item of a string tensor: bytes and a length, not NUL-terminated",
}

DECLARATIONS = "python/sluice/_header.py"


class _Opaque:
    """The ctypes of a type with no layout here: one only behind a pointer."""

    def __repr__(self):
        return "an incomplete type"


OPAQUE = _Opaque()


def preprocess(root, experimental, cc=None):
    """include/sluice.h through the C preprocessor (cc -E), against the
    stand-ins for the system headers; SLUICE_EXPERIMENTAL defined or not."""
    cc = shlex.split(cc or os.environ.get("CC") or "cc")
    prelude = "".join("typedef int %s;\n" % n for n, t in LIBC_TYPES.items() if t)
    prelude += "".join("typedef struct %s %s;\n" % (n, n) for n, t in LIBC_TYPES.items()
                       if not t)
    with tempfile.TemporaryDirectory() as stubs:
        for name in SYSTEM_HEADERS:
            open(os.path.join(stubs, name), "w").close()
        source = prelude + '#include "%s"\n' % os.path.abspath(os.path.join(root, HEADER))
        # with line markers: pycparser then names the header's own lines
        # GNU attributes (SL_DEPRECATED's) are no C that pycparser reads
        args = cc + ["-E", "-nostdinc", "-isystem", stubs, "-D__attribute__(x)=", "-x", "c",
                     "-"]
        if experimental:
            args.insert(len(cc), "-DSLUICE_EXPERIMENTAL")
        try:
            r = subprocess.run(args, input=source, capture_output=True, text=True)
        except OSError as e:
            raise ParseError("cannot run the preprocessor %s: %s" % (cc[0], e)) from None
    if r.returncode:
        raise ParseError("%s -E %s failed:\n%s" % (" ".join(cc), HEADER, r.stderr.strip()))
    return r.stdout


def parse_c(text):
    """The pycparser AST of preprocessed C text."""
    from pycparser import c_parser
    try:
        return c_parser.CParser().parse(text, HEADER)
    except c_parser.ParseError as e:
        raise ParseError("pycparser: %s (a type the header takes from a system header must "
                         "be in LIBC_TYPES)" % e) from None


def _constant(node, where):
    """The value of an array dimension: an integer constant expression."""
    from pycparser import c_ast
    if isinstance(node, c_ast.Constant) and node.type in ("int", "unsigned int", "long int",
                                                          "unsigned long int", "long long int",
                                                          "unsigned long long int"):
        return evaluate(node.value, {}, where)
    if isinstance(node, c_ast.UnaryOp) and node.op in ("+", "-"):
        v = _constant(node.expr, where)
        return -v if node.op == "-" else v
    if isinstance(node, c_ast.BinaryOp) and node.op in ("+", "-", "*", "<<", ">>", "|", "&"):
        return evaluate("(%d) %s (%d)" % (_constant(node.left, where), node.op,
                                          _constant(node.right, where)), {}, where)
    raise ParseError("%s: an array size this script cannot evaluate" % where)


class Declarations:
    """What the binding declares, in header order: struct layouts, callback
    types (typedefs of function pointers) and functions."""

    def __init__(self, ast):
        from pycparser import c_ast
        self.ast = c_ast
        self.typedefs = {}   # name -> its type node
        self.layouts = {}    # struct tag -> its member Decls, for structs with a body
        self.versioned = set()  # tags of structs whose first member is size_t struct_size
        self.structs = []    # (tag, [(member, ctypes)]) in header order
        self.callbacks = []  # (name, restype, [argtypes]) in header order
        self.functions = []  # (name, restype, [argtypes]) in header order
        for node in ast.ext:
            self._collect(node)
        for node in ast.ext:
            self._declare(node)

    # -- pass 1: names and layouts, so that a pointer may name a later struct

    def _struct_of(self, node):
        """The struct or union a declaration's type is (not points to), or
        None: `struct x {...};` and `typedef struct x {...} x;` alike."""
        t = getattr(node, "type", None)
        t = t.type if isinstance(t, self.ast.TypeDecl) else t
        return t if isinstance(t, (self.ast.Struct, self.ast.Union)) else None

    def _collect(self, node):
        where = self._where(node)
        if isinstance(node, self.ast.FuncDef):
            raise ParseError("%s: %s has a body in the header: Python can only call an "
                             "exported symbol (STYLE.md rule 6)" % (where, node.decl.name))
        if isinstance(node, self.ast.Typedef):
            if node.name in LIBC_TYPES:
                return
            self.typedefs[node.name] = node.type
            if isinstance(node.type, self.ast.FuncDecl):
                raise ParseError("%s: %s: a typedef of a function type (not a pointer to "
                                 "one) needs this script taught" % (where, node.name))
        s = self._struct_of(node)
        if isinstance(s, self.ast.Union):
            raise ParseError("%s: a union needs this script taught" % where)
        if s is not None and s.decls is not None:
            if not s.name:
                raise ParseError("%s: an anonymous struct: give it a tag" % where)
            self.layouts[s.name] = s.decls
            first = s.decls[0] if s.decls else None
            if first is not None and first.name == "struct_size":
                self.versioned.add(s.name)

    # -- pass 2: the ctypes of each declaration

    def _declare(self, node):
        where = self._where(node)
        if isinstance(node, self.ast.Typedef):
            if node.name in LIBC_TYPES:
                return
            if self._is_function_pointer(node.type):
                res, args = self.signature(node.type.type, where + ": " + node.name)
                self.callbacks.append((node.name, res, args))
        elif isinstance(node, self.ast.Decl) and isinstance(node.type, self.ast.FuncDecl):
            self._function(node, where)
        elif isinstance(node, self.ast.Decl) and node.name is not None:
            raise ParseError("%s: %s: the header declares an object; Python calls only "
                             "functions" % (where, node.name))
        s = self._struct_of(node)
        if s is not None and s.decls is not None:
            fields = []
            for m in s.decls:
                w = "%s: struct %s: %s" % (self._where(m), s.name, m.name)
                if m.name is None or m.bitsize is not None:
                    raise ParseError("%s: an anonymous or bit-field member needs this "
                                     "script taught" % w)
                fields.append((m.name, self.value(m.type, w)))
            self.structs.append((s.name, fields))

    def _function(self, node, where):
        name = node.name
        res, args = self.signature(node.type, where + ": " + name)
        if name in NOT_C_STRINGS:
            if res != "c_char_p":
                raise ParseError("%s: NOT_C_STRINGS names %s, which does not return char *"
                                 % (where, name))
            res = "POINTER(c_char)"
        self.functions.append((name, res, args))

    # -- types

    @staticmethod
    def _where(node):
        c = node.coord
        if not c:
            return HEADER
        name = HEADER if c.file.endswith(HEADER) else c.file
        return "%s:%s" % (name, c.line)

    def _is_function_pointer(self, t):
        return isinstance(t, self.ast.PtrDecl) and isinstance(t.type, self.ast.FuncDecl)

    def _by_value_struct(self, t):
        """Whether type t is a struct (not a pointer to one), through typedefs."""
        while isinstance(t, self.ast.TypeDecl):
            inner = t.type
            if isinstance(inner, self.ast.Struct):
                return True
            if isinstance(inner, self.ast.IdentifierType) and len(inner.names) == 1 and \
                    inner.names[0] in self.typedefs:
                t = self.typedefs[inner.names[0]]
                continue
            return False
        return False

    def signature(self, fdecl, where):
        """(restype, [argtypes]) of a FuncDecl."""
        if self._by_value_struct(fdecl.type):
            raise ParseError("%s returns a struct by value: ctypes-callable functions pass "
                             "structs by pointer (STYLE.md rule 6)" % where)
        res = self.ctype(fdecl.type, where)
        if res is OPAQUE:
            raise ParseError("%s returns an incomplete type" % where)
        params = fdecl.args.params if fdecl.args else []
        if len(params) == 1 and self._is_void(params[0]):
            params = []
        args = []
        for p in params:
            if isinstance(p, self.ast.EllipsisParam):
                raise ParseError("%s is variadic: ctypes cannot check its arguments "
                                 "(STYLE.md rule 6)" % where)
            w = "%s: parameter %s" % (where, p.name)
            if self._by_value_struct(p.type):
                raise ParseError("%s: a struct by value: pass it by pointer (STYLE.md rule 6)"
                                 % w)
            t = p.type
            if isinstance(t, self.ast.ArrayDecl):  # a parameter array is a pointer
                t = self.ast.PtrDecl([], t.type)
            args.append(self.value(t, w))
        return res, args

    def _is_void(self, p):
        t = p.type
        return (isinstance(t, self.ast.TypeDecl) and isinstance(t.type, self.ast.IdentifierType)
                and t.type.names == ["void"])

    def value(self, t, where):
        """The ctypes of a type that must have a size (a member, an argument)."""
        c = self.ctype(t, where)
        if c is OPAQUE or c == "None":
            raise ParseError("%s: %s used by value" % (where, "void" if c == "None" else c))
        return c

    def ctype(self, t, where):
        """The ctypes expression (text) for type node t; "None" for void;
        OPAQUE for a struct without a body here."""
        ast = self.ast
        if isinstance(t, ast.TypeDecl):
            return self._named(t.type, where)
        if isinstance(t, ast.PtrDecl):
            if isinstance(t.type, ast.FuncDecl):
                res, args = self.signature(t.type, where + " (a function pointer)")
                return "CFUNCTYPE(%s)" % ", ".join([res] + args)
            inner = self.ctype(t.type, where)
            if inner is OPAQUE or inner == "None":
                return "c_void_p"
            if inner == "c_char":
                return "c_char_p"
            return "POINTER(%s)" % inner
        if isinstance(t, ast.ArrayDecl):
            if t.dim is None:
                raise ParseError("%s: an array of unknown size" % where)
            return "(%s * %d)" % (self.value(t.type, where), _constant(t.dim, where))
        if isinstance(t, ast.FuncDecl):  # a parameter of function type: a pointer
            return self.ctype(ast.PtrDecl([], t), where)
        raise ParseError("%s: a %s needs this script taught" % (where, type(t).__name__))

    def _named(self, t, where):
        ast = self.ast
        if isinstance(t, ast.Enum):
            return "c_int"  # every sluice enum fits an int (C's rule for their size)
        if isinstance(t, ast.Struct):
            return t.name if t.name in self.layouts else OPAQUE
        if isinstance(t, ast.Union):
            raise ParseError("%s: a union needs this script taught" % where)
        names = t.names
        if len(names) == 1 and names[0] in LIBC_TYPES:
            c = LIBC_TYPES[names[0]]
            return OPAQUE if c is None else c
        if len(names) == 1 and names[0] in self.typedefs:
            target = self.typedefs[names[0]]
            if self._is_function_pointer(target):
                return names[0]  # the callback type, declared by that name
            return self.ctype(target, where)
        rest = [w for w in names if w not in ("signed", "unsigned")]
        if len(rest) > 1 and "int" in rest:
            rest.remove("int")  # short int, long long int
        key = " ".join(rest or ["int"])
        if "signed" in names and key == "char":
            key = "signed char"
        if "unsigned" in names:
            key = "unsigned" if key == "int" else "unsigned " + key
        if key not in BASIC_TYPES:
            raise ParseError("%s: the type %r needs this script taught" % (where, " ".join(names)))
        c = BASIC_TYPES[key]
        return "None" if c is None else c


def parse_declarations(root, cc=None):
    """The Declarations of the header read with SLUICE_EXPERIMENTAL, and the
    names of the functions only that tier declares."""
    full = Declarations(parse_c(preprocess(root, True, cc)))
    stable = Declarations(parse_c(preprocess(root, False, cc)))
    stable_names = {f[0] for f in stable.functions}
    return full, [f[0] for f in full.functions if f[0] not in stable_names]


def _wrap(head, items, tail, indent, width=99):
    """head + ", ".join(items) + tail, broken after commas to fit width."""
    lines, line = [], head
    for i, item in enumerate(items):
        last = i + 1 == len(items)
        piece = item + (tail if last else ",")
        if len(line) + len(piece) > width and line != head:
            lines.append(line.rstrip())
            line = " " * indent
        line += piece if last else piece + " "
    lines.append(line if items else line + tail)
    return lines


def declarations_text(d, experimental):
    exprs = [c for _, fields in d.structs for _, c in fields]
    exprs += [c for _, res, args in d.callbacks + d.functions for c in [res] + args]
    used = set(re.findall(r"\b(c_\w+|CFUNCTYPE|POINTER)\b", " ".join(exprs)))
    out = [
        '"""The types and functions of include/sluice.h, as ctypes declares them.',
        "",
        "Generated by scripts/gen_binding.py from include/sluice.h (with",
        "SLUICE_EXPERIMENTAL defined), read by pycparser: do not edit. After",
        "changing the header, run `cmake --build BUILD --target python_binding`",
        "(or the script); the check_binding test fails while the two disagree,",
        "and tests/python/test_layout.py compares every struct's size and",
        "member offsets with the C compiler's.",
        "",
        "Pointers to types the header leaves incomplete (sl_dataset, FILE...) are",
        "c_void_p, `char *` is c_char_p, and enums are c_int.",
        '"""',
        "",
    ]
    out += _wrap("from ctypes import (", sorted(used | {"Structure", "sizeof"}), ")", 20)
    out += [
        "", "",
        "class _Versioned(Structure):",
        '    """A struct versioned by its first member, struct_size: a new one holds',
        "    its own full size, this header's, so that the library reads every",
        '    member (test_layout checks that the header\'s size is the same)."""',
        "",
        "    def __init__(self, *args, **kwargs):",
        "        super().__init__(*args, **kwargs)",
        "        if not self.struct_size:",
        "            self.struct_size = sizeof(self)",
        "", "",
        "# ---- Structs, declared before their layouts so that any may point to any",
    ]
    for tag, _ in d.structs:
        base = "_Versioned" if tag in d.versioned else "Structure"
        out += ["", "", "class %s(%s):" % (tag, base), '    """struct %s."""' % tag]
    out += ["", "", "# ---- Callback types: the header's typedefs of function pointers", ""]
    for name, res, args in d.callbacks:
        head = "%s = CFUNCTYPE(" % name
        out += _wrap(head, [res] + args, ")", len(head))
    out += ["", "", "# ---- Struct layouts, member for member"]
    for tag, fields in d.structs:
        out += ["", "%s._fields_ = [" % tag]
        out += ['    ("%s", %s),' % f for f in fields]
        out += ["]"]
    out += [""]
    out += _wrap("STRUCTS = (", [tag for tag, _ in d.structs], ")", 11)
    tiers = (("FUNCTIONS", "The stable core",
              [f for f in d.functions if f[0] not in experimental]),
             ("EXPERIMENTAL_FUNCTIONS", "The SLUICE_EXPERIMENTAL section",
              [f for f in d.functions if f[0] in experimental]))
    for var, title, functions in tiers:
        out += ["", "# %s: name -> (restype, argtypes), in header order." % title,
                "%s = {" % var]
        for name, res, args in functions:
            head = '    "%s": (%s, [' % (name, res)
            out += _wrap(head, args, "]),", len(head))
        out += ["}"]
    return "\n".join(out) + "\n"


class Unavailable(Exception):
    """A tool the declarations need is missing here (pycparser)."""


def outputs(root, constants_only=False):
    """(path, text, what it holds) of each module this writes."""
    with open(os.path.join(root, HEADER), encoding="utf-8") as f:
        h = parse_constants(f.read())
    yield CONSTANTS, constants_text(h), "%d constants" % len(h.values)
    if importlib.util.find_spec("pycparser") is None:
        raise Unavailable("pycparser is not installed (apt install python3-pycparser); "
                          "%s was not generated" % DECLARATIONS)
    d, experimental = parse_declarations(root)
    yield (DECLARATIONS, declarations_text(d, experimental),
           "%d structs, %d callback types, %d functions"
           % (len(d.structs), len(d.callbacks), len(d.functions)))


def check(path, text, root):
    """0 when the checked-in module at path is text; else 1, with the diff."""
    try:
        with open(os.path.join(root, path), encoding="utf-8") as f:
            old = f.read()
    except FileNotFoundError:
        old = ""
    if old == text:
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True),
                                               path, "from " + HEADER))
    print("check_binding: %s is not what %s gives; run scripts/gen_binding.py"
          % (path, HEADER))
    return 1


def main(argv):
    checking = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        sys.exit("usage: gen_binding.py [--check] [SOURCE_DIR]")
    root = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    status = 0
    try:
        for path, text, what in outputs(root):
            if not checking:
                with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                    f.write(text)
            elif check(path, text, root) == 0:
                print("check_binding: %s matches %s (%s)" % (path, HEADER, what))
            else:
                status = 1
    except ParseError as e:
        sys.exit("gen_binding: %s" % e)
    except Unavailable as e:
        if not checking:
            sys.exit("gen_binding: %s" % e)
        print("check_binding: skipped: %s" % e)
        return status or 77
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
