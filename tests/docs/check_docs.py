#!/usr/bin/env python3
"""The documentation's checks, run by ctest (tests/docs/CMakeLists.txt):

  cli      every option that `attnviz --help` and each subcommand's --help print is written
           (as `--name`) somewhere in docs/, and each subcommand has a section in
           docs/command-line.md;
  refs     every document a source file names (a path ending in .md) exists in the repository;
  words    no process words (the word issue, round or session before a number) in the code, tests, tools or
           docs: a reader of the repository cannot look them up;
  readme   README.md is a front page: at most 200 lines.

Usage: check_docs.py ROOT cli ATTNVIZ_BINARY | ROOT refs | ROOT words | ROOT readme
Prints one line per problem and exits 1 when there is any.
"""
import os
import re
import subprocess
import sys

SUBCOMMANDS = ["compute", "export", "model", "tokenize", "generate", "score", "retrieval",
               "fill", "attribute", "heads", "qk", "compose"]
# Folders whose text files are checked for document references and process words.
SOURCE_DIRS = ["core", "app", "tests", "tools", "shaders", "cmake", "assets/man", ".ci"]
SOURCE_FILES = ["dev", "CMakeLists.txt"]
TEXT_EXT = {".cpp", ".h", ".hpp", ".py", ".sh", ".txt", ".cmake", ".js", ".mjs", ".comp",
            ".vert", ".frag", ".md", ".json", ".1", ".in", ""}
# Names of Markdown files that scripts write (outputs, not documents the comments point to).
GENERATED = {"quant_table.md", "README.md.tmp"}


def text_files(root, dirs, files):
    for d in dirs:
        for base, subdirs, names in os.walk(os.path.join(root, d)):
            subdirs[:] = [s for s in subdirs if s not in ("fixtures", "corpus", "node_modules")
                          and not s.startswith("build")]
            for n in sorted(names):
                if os.path.splitext(n)[1] in TEXT_EXT:
                    yield os.path.join(base, n)
    for f in files:
        yield os.path.join(root, f)


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return ""


def docs_text(root):
    out = [read(os.path.join(root, "README.md"))]
    for base, _, names in os.walk(os.path.join(root, "docs")):
        out += [read(os.path.join(base, n)) for n in sorted(names) if n.endswith(".md")]
    return "\n".join(out)


def check_cli(root, binary):
    problems = []
    docs = docs_text(root)
    cli_doc = read(os.path.join(root, "docs", "command-line.md"))
    for sub in [None] + SUBCOMMANDS:
        args = [binary] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            problems.append(f"{' '.join(args[1:])}: exit {r.returncode}")
            continue
        options = sorted(set(re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", r.stdout)))
        if len(options) < 2:
            problems.append(f"{' '.join(args[1:])}: printed no options")
        for opt in options:
            if opt in ("--help", "--version"):
                continue
            if not re.search(re.escape(opt) + r"(?![\w-])", docs):
                where = f"attnviz {sub}" if sub else "attnviz"
                problems.append(f"{where} {opt}: not in docs/")
        if sub and not re.search(r"^#+ .*\b" + sub + r"\b", cli_doc, re.M):
            problems.append(f"docs/command-line.md: no section for `attnviz {sub}`")
    return problems


def check_refs(root):
    problems = []
    existing = set()
    for base, subdirs, names in os.walk(root):
        subdirs[:] = [s for s in subdirs if s != ".git" and not s.startswith("build")]
        existing.update(n for n in names if n.endswith(".md"))
    ref = re.compile(r"(?<![\w./-])((?:\.\./|[\w-]+/)*[\w.-]+\.md)(?![\w-])")
    for path in text_files(root, SOURCE_DIRS, SOURCE_FILES):
        rel = os.path.relpath(path, root)
        for n, line in enumerate(read(path).splitlines(), 1):
            for m in ref.finditer(line):
                name = m.group(1)
                if name in GENERATED or name.startswith("../shared/") or name[0].isupper() and \
                        "/" in name and name.split("/")[0].isupper():
                    continue  # outside data; placeholders such as DIR/README.md
                if "/" in name:
                    ok = any(os.path.isfile(os.path.normpath(os.path.join(b, name)))
                             for b in (root, os.path.dirname(path)))
                else:
                    ok = os.path.basename(name) in existing
                if not ok:
                    problems.append(f"{rel}:{n}: names {name}, which is not in the repository")
    return problems


def check_words(root):
    problems = []
    # Built from parts so that this file does not match itself.
    words = re.compile(r"\b(" + "|".join(["iss" + "ue", "rou" + "nd", "sess" + "ion"]) +
                       r")\b[ #-]*[0-9]+\b", re.I)
    for path in list(text_files(root, SOURCE_DIRS + ["docs"], SOURCE_FILES + ["README.md"])):
        rel = os.path.relpath(path, root)
        for n, line in enumerate(read(path).splitlines(), 1):
            m = words.search(line)
            if m:
                problems.append(f"{rel}:{n}: process word '{m.group(0)}' (name the feature)")
    return problems


def check_readme(root):
    n = len(read(os.path.join(root, "README.md")).splitlines())
    return [f"README.md: {n} lines, more than 200 (move the detail to docs/)"] if n > 200 else []


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    root, what = sys.argv[1], sys.argv[2]
    if what == "cli" and len(sys.argv) == 4:
        problems = check_cli(root, sys.argv[3])
    elif what in ("refs", "words", "readme") and len(sys.argv) == 3:
        problems = {"refs": check_refs, "words": check_words, "readme": check_readme}[what](root)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    for p in problems:
        print(p)
    print(f"{what}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
