#!/usr/bin/env python3
"""The architecture of docs/design/architecture.md, checked: core/ is libraries that depend only
downwards.

One table says what each module may use. The check fails when
  - a header or source of a module includes a header of a module it may not use (one above it,
    or one beside it that it does not link);
  - a module includes a third-party header that belongs to another module (ICU only in model,
    libzip only in formats, fontconfig, cairo and FreeType only in render, stb in render (PNG writing)
    and formats (image decoding), muParser only in engine, GL/EGL
    only in gpu; GLFW and ImGui nowhere in core);
  - the CMake link graph (attnviz_layer_links.txt, written at configure time from each target's
    LINK_LIBRARIES) links a module to an attnviz library outside its row, or the row's libraries
    are not all linked.

Usage: check_layering.py SOURCE_DIR [LINKS_FILE]
"""
import os
import re
import sys

# module -> the attnviz modules it may include from and link (besides itself).
ALLOWED = {
    "engine": set(),
    "formats": {"engine"},
    "model": {"engine", "formats"},
    "render": {"engine", "formats"},
    "gpu": {"engine", "shaders"},
    "session": {"engine", "formats", "model", "render"},
}
# Third-party headers (by prefix of the include path) and the one module each belongs to.
THIRD_PARTY = {
    "unicode/": {"model"},
    "sentencepiece": {"model"},
    "zip.h": {"formats"},
    "fontconfig/": {"render"},
    "cairo": {"render"},
    "ft2build": {"render"},
    "stb_": {"render", "formats"},  # stb_image decodes images (formats), stb_image_write writes PNGs
    "muParser": {"engine"},
    "GL/": {"gpu"},
    "EGL/": {"gpu"},
    "GLFW/": set(),
    "imgui": set(),
}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


def module_files(src):
    core = os.path.join(src, "core")
    for mod in sorted(os.listdir(core)):
        root = os.path.join(core, mod)
        if not os.path.isdir(root):
            continue
        for dirpath, _, files in os.walk(root):
            for f in files:
                if f.endswith((".h", ".hpp", ".cpp", ".cc")):
                    yield mod, os.path.join(dirpath, f)


def check_includes(src):
    problems = []
    modules = set()
    for mod, path in module_files(src):
        modules.add(mod)
        if mod not in ALLOWED:
            problems.append(f"{path}: core/{mod} is not in the layering table")
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        rel = os.path.relpath(path, src)
        for m in INCLUDE.finditer(text):
            inc = m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            a = re.match(r"attnviz/(\w+)/", inc)
            if a:
                other = a.group(1)
                if other != mod and other not in ALLOWED[mod]:
                    problems.append(f"{rel}:{line}: core/{mod} includes {inc} "
                                    f"(it may use only {sorted(ALLOWED[mod]) or 'nothing'})")
                continue
            if inc.startswith("attnviz/"):
                problems.append(f"{rel}:{line}: {inc} names no module (attnviz/<module>/...)")
                continue
            for prefix, owners in THIRD_PARTY.items():
                if inc.startswith(prefix) and mod not in owners:
                    where = ", ".join(sorted(owners)) if owners else "no core module"
                    problems.append(f"{rel}:{line}: core/{mod} includes <{inc}>, which belongs "
                                    f"to {where}")
    missing = set(ALLOWED) - modules
    for mod in sorted(missing):
        problems.append(f"core/{mod}: a module of the table is missing from the tree")
    return problems


# Third-party link targets and the one module each belongs to.
THIRD_PARTY_LINKS = {
    "ICU::": "model", "PkgConfig::SENTENCEPIECE": "model", "PkgConfig::LIBZIP": "formats",
    "PkgConfig::STB": ("render", "formats"), "PkgConfig::FONTCONFIG": "render",
    "PkgConfig::CAIRO": "render",
    "PkgConfig::MUPARSER": "engine", "OpenGL::": "gpu",
}


def check_links(path):
    problems = []
    seen = set()
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if not line:
            continue
        mod, _, libs = line.partition("=")
        seen.add(mod)
        linked = set()
        for lib in libs.split(";"):
            lib = re.sub(r"\$<LINK_ONLY:(.*)>", r"\1", lib.strip())
            if lib.startswith("attnviz_"):
                linked.add(lib[len("attnviz_"):])
            for prefix, owner in THIRD_PARTY_LINKS.items():
                owners = owner if isinstance(owner, tuple) else (owner,)
                if lib.startswith(prefix) and mod not in owners:
                    problems.append(f"CMake: attnviz_{mod} links {lib}, which belongs to "
                                    f"{owner}")
        for other in sorted(linked - ALLOWED.get(mod, set()) - {mod}):
            problems.append(f"CMake: attnviz_{mod} links attnviz_{other}, which the table "
                            f"does not allow")
        for other in sorted(ALLOWED.get(mod, set()) - linked):
            if other == "shaders" or other == "gpu":
                continue
            problems.append(f"CMake: attnviz_{mod} does not link attnviz_{other} (the table says "
                            f"it uses it)")
    for mod in sorted({"engine", "formats", "model", "render", "session"} - seen):
        problems.append(f"CMake: no link row for attnviz_{mod}")
    return problems


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    src = sys.argv[1]
    problems = check_includes(src)
    if len(sys.argv) > 2:
        problems += check_links(sys.argv[2])
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s)")
        return 1
    print("layering: every include and link points downwards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
