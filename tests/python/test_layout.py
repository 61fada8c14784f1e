"""The generated ctypes declarations (sluice/_header.py) against the C
compiler: every struct of include/sluice.h is there, with its members in
the header's order, at the compiler's offsets and sizes, and the struct at
the compiler's size and alignment. A member missing from Python, one out
of order or of another type fails here (struct_size would otherwise let
the library read a shorter Python struct without a word).

The members are listed from the header by pycparser and their layout
printed by a small C program built with the compiler CTest names
(SLUICE_CC), so neither side is taken from the module under test."""

import ctypes
import importlib.util
import os
import shlex
import subprocess

import pytest

from conftest import SOURCE_DIR

pytest.importorskip("pycparser", reason="pycparser is not installed (apt install "
                    "python3-pycparser)")

import sluice  # noqa: E402 (after the skip)
from sluice import _header  # noqa: E402
from sluice._lib import lib  # noqa: E402

CC = shlex.split(os.environ.get("SLUICE_CC") or os.environ.get("CC") or "cc")


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_binding", os.path.join(SOURCE_DIR, "scripts", "gen_binding.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env():
    """The environment for the compiler: without the ASan runtime that
    run.py preloads into this interpreter in an ASan build."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


@pytest.fixture(scope="module")
def header_members():
    """struct tag -> its member names in order, for every struct the header
    defines, read from the preprocessed header's syntax tree."""
    from pycparser import c_ast
    gen = _generator()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("LD_PRELOAD", raising=False)
            text = gen.preprocess(SOURCE_DIR, True, shlex.join(CC))
    except gen.ParseError as e:
        if "cannot run" in str(e):
            pytest.skip("no C compiler: %s" % e)
        raise
    structs = {}
    for node in gen.parse_c(text).ext:
        t = getattr(node, "type", None)
        t = t.type if isinstance(t, c_ast.TypeDecl) else t
        if isinstance(t, c_ast.Struct) and t.decls is not None:
            structs[t.name] = [m.name for m in t.decls]
    assert structs, "no struct found in the header"
    return structs


@pytest.fixture(scope="module")
def compiler_layout(header_members, tmp_path_factory):
    """struct tag -> (size, alignment, {member: (offset, size, alignment)})
    as the C compiler lays them out."""
    lines = ["#define SLUICE_EXPERIMENTAL",
             "#include <stddef.h>",
             "#include <stdio.h>",
             '#include "sluice.h"',
             "#define STRUCT(T) printf(\"struct %s %zu %zu\\n\", #T, sizeof(struct T), "
             "(size_t)_Alignof(struct T));",
             "#define MEMBER(T, m) printf(\"member %s %s %zu %zu %zu\\n\", #T, #m, "
             "offsetof(struct T, m), sizeof(((struct T *)0)->m), "
             "(size_t)__alignof__(((struct T *)0)->m));",
             "int main(void)", "{"]
    for tag, members in header_members.items():
        lines.append("    STRUCT(%s)" % tag)
        lines += ["    MEMBER(%s, %s)" % (tag, m) for m in members]
    lines += ["    return 0;", "}"]
    tmp = tmp_path_factory.mktemp("layout")
    src, exe = tmp / "layout.c", tmp / "layout"
    src.write_text("\n".join(lines) + "\n")
    cmd = CC + ["-std=c11", "-Wall", "-Werror", "-I", os.path.join(SOURCE_DIR, "include"),
                "-o", str(exe), str(src)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env())
    except OSError as e:
        pytest.skip("no C compiler (%s): %s" % (CC[0], e))
    assert r.returncode == 0, "%s failed:\n%s" % (" ".join(cmd), r.stderr)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True,
                         env=_env()).stdout
    layout = {}
    for line in out.splitlines():
        kind, tag, *rest = line.split()
        if kind == "struct":
            layout[tag] = (int(rest[0]), int(rest[1]), {})
        else:
            layout[tag][2][rest[0]] = tuple(int(x) for x in rest[1:])
    return layout


def test_every_header_struct_is_generated(header_members):
    assert sorted(cls.__name__ for cls in _header.STRUCTS) == sorted(header_members)


def test_members_are_the_headers_in_order(header_members):
    for cls in _header.STRUCTS:
        assert [f[0] for f in cls._fields_] == header_members[cls.__name__], cls.__name__


def test_sizes_and_offsets_are_the_compilers(compiler_layout):
    wrong = []
    for cls in _header.STRUCTS:
        size, align, members = compiler_layout[cls.__name__]
        if (ctypes.sizeof(cls), ctypes.alignment(cls)) != (size, align):
            wrong.append("%s: size %d align %d in Python, %d and %d in C" % (
                cls.__name__, ctypes.sizeof(cls), ctypes.alignment(cls), size, align))
        for name, ctype in cls._fields_:
            field = getattr(cls, name)
            offset, msize, malign = members[name]
            if (field.offset, field.size, ctypes.alignment(ctype)) != (offset, msize, malign):
                wrong.append("%s.%s: offset %d size %d align %d in Python, %d %d %d in C" % (
                    cls.__name__, name, field.offset, field.size, ctypes.alignment(ctype),
                    offset, msize, malign))
    assert not wrong, "\n".join(wrong)


def test_members_fill_the_struct(compiler_layout):
    """The members the header lists account for every byte the compiler
    gives the struct but alignment padding, so none was left out of the
    list the other tests compare with."""
    for tag, (size, align, members) in compiler_layout.items():
        end = 0
        for name, (offset, msize, malign) in sorted(members.items(), key=lambda m: m[1][0]):
            assert offset == -(-end // malign) * malign, "%s: a hole before %s" % (tag, name)
            end = offset + msize
        assert size == -(-end // align) * align, "%s: a hole after its last member" % tag


def test_versioned_structs_carry_their_full_size(compiler_layout):
    versioned = [cls for cls in _header.STRUCTS if issubclass(cls, _header._Versioned)]
    assert {cls.__name__ for cls in versioned} == {"sl_image_spec", "sl_mixup_spec",
                                                   "sl_video_spec", "sl_audio_spec",
                                                   "sl_service_spec", "sl_worker_spec"}
    for cls in versioned:
        assert cls().struct_size == ctypes.sizeof(cls) == compiler_layout[cls.__name__][0]
    spec = _header.sl_image_spec()
    assert lib.sl_image_spec_init(spec, ctypes.sizeof(spec), 0, 224) == 0
    assert spec.struct_size == compiler_layout["sl_image_spec"][0]
    mix = _header.sl_mixup_spec()
    assert lib.sl_mixup_spec_init(mix, ctypes.sizeof(mix), 10) == 0
    assert mix.struct_size == compiler_layout["sl_mixup_spec"][0]
    video = _header.sl_video_spec()
    assert lib.sl_video_spec_init(video, ctypes.sizeof(video)) == 0
    assert video.struct_size == compiler_layout["sl_video_spec"][0] and video.frames == 8
    audio = _header.sl_audio_spec()
    assert lib.sl_audio_spec_init(audio, ctypes.sizeof(audio)) == 0
    assert audio.struct_size == compiler_layout["sl_audio_spec"][0] and audio.n_fft == 400
    svc = _header.sl_service_spec()
    assert lib.sl_service_spec_init(svc, ctypes.sizeof(svc)) == 0
    assert svc.struct_size == compiler_layout["sl_service_spec"][0] and svc.split_batches == 2
    wk = _header.sl_worker_spec()
    assert lib.sl_worker_spec_init(wk, ctypes.sizeof(wk)) == 0
    assert wk.struct_size == compiler_layout["sl_worker_spec"][0]


def test_the_binding_passes_full_sizes(monkeypatch, compiler_layout):
    """What map_image and mixup_cutmix hand the library says the header's
    size, whatever the defaults: the library then reads every member."""
    import numpy as np
    seen = {}

    def spy(name, size_of):
        real = getattr(lib, name)

        def call(*args):
            seen[name] = size_of(args)
            return real(*args)
        call.__name__ = name
        monkeypatch.setattr(lib, name, call)

    spy("sl_map_image", lambda a: a[1].struct_size)
    spy("sl_map_image_views", lambda a: {s.struct_size for s in a[1]})
    spy("sl_mixup_cutmix", lambda a: a[1]._obj.struct_size)
    images = sluice.Dataset.from_tensor_slices(
        (np.zeros((4, 8), np.uint8), np.arange(4, dtype=np.int64)))
    images.map_image("train", 16)
    images.map_image("train", 16, views=[sluice.View(size=8, count=2)])
    images.map_image("eval", 16).batch(2).mixup_cutmix(num_classes=4)
    image_size = compiler_layout["sl_image_spec"][0]
    assert seen == {"sl_map_image": image_size, "sl_map_image_views": {image_size},
                    "sl_mixup_cutmix": compiler_layout["sl_mixup_spec"][0]}


def test_every_function_is_in_the_library():
    missing = [name for name in list(_header.FUNCTIONS) + list(_header.EXPERIMENTAL_FUNCTIONS)
               if not hasattr(lib, name)]
    assert not missing
    assert lib.sl_map_image_views.argtypes == _header.FUNCTIONS["sl_map_image_views"][1]
