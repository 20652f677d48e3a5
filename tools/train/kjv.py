"""The training text: the King James Bible from Debian's bible-kjv package (public domain).

`bible -f "Gen1:1-Rev22:21"` prints one verse a line, each prefixed by its reference
("Ge1:1 In the beginning ..."). The references are stripped, so the model sees plain English
with one verse a line. The held-out split is the tail from Hebrews 1:1 to the end (Hebrews,
James, 1-2 Peter, 1-3 John, Jude, Revelation): about 3.7% of the text, never trained on.
"""
import re
import subprocess

PACKAGE = "bible-kjv"
RANGE = "Gen1:1-Rev22:21"
HELDOUT_FROM = "Heb1:1"
_REF = re.compile(r"^(\S*?\d+:\d+) ")


def verses():
    """-> list of (reference, text), in order."""
    try:
        out = subprocess.run(["bible", "-f", RANGE], check=True, capture_output=True,
                             text=True, encoding="utf-8").stdout
    except FileNotFoundError:
        raise SystemExit(f"the `bible` command is missing: apt-get install {PACKAGE}")
    result = []
    for line in out.splitlines():
        m = _REF.match(line)
        if not m:
            raise SystemExit(f"bible: unexpected line {line[:60]!r}")
        result.append((m.group(1), line[m.end():]))
    return result


def splits():
    """-> (train_text, heldout_text), verses joined one a line."""
    vs = verses()
    cut = next(i for i, (ref, _) in enumerate(vs) if ref == HELDOUT_FROM)
    train = "".join(t + "\n" for _, t in vs[:cut])
    heldout = "".join(t + "\n" for _, t in vs[cut:])
    return train, heldout
