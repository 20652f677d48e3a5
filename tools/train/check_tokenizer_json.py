#!/usr/bin/python3
"""Checks a model folder's tokenizer.json against its tokenizer.model: every text of a corpus
(held-out and training verses, and unicode and whitespace cases) is encoded by SentencePiece
(with BOS, as add_bos_token asks) and by the npm package @huggingface/tokenizers (a pure-JS
implementation of HF tokenizers) on tokenizer.json + tokenizer_config.json; the ids must be
identical.

Usage: check_tokenizer_json.py --model DIR [--tokjs /tmp/tokjs] [--json OUT.json]
  (npm install --prefix /tmp/tokjs @huggingface/tokenizers@0.2.0 first; node must be on PATH)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

EXTRA = [
    "",
    " ",
    "  two leading spaces and two  inside and trailing  ",
    "In the beginning God created the heaven and the earth.",
    "The grace of our Lord Jesus Christ be with you all. Amen.",
    "tab\tand\nnewline\r\nand carriage return",
    "Digits 0123456789 and 3.14159, 1611 AD, 22:21.",
    "Café naïve résumé façade coöperate Æsop œuvre ß Straße",
    "Ελληνικά: Ἐν ἀρχῇ ἦν ὁ λόγος",
    "Русский текст: В начале было Слово",
    "עברית: בְּרֵאשִׁית בָּרָא אֱלֹהִים",
    "中文：太初有道，道与神同在。日本語のテキスト、한국어 텍스트",
    "Emoji 😀🙏🏽👨‍👩‍👧 and ✝ ☧ ⚓ symbols",
    "combining e\u0301 vs \u00e9, zero\u200bwidth, nbsp\u00a0here, bom\ufeffmid",
    "aaaa eeee llll ssss tttt oooo ssssss lllllll",
    "mississippi bookkeeper committee Hallelujah",
    "UPPERCASE LORD GOD JEHOVAH, MixedCase iPhone McDonald",
    "punctuation!?;:'\"()[]{}<>-_=+*&^%$#@~`|\\/",
    "▁already▁has▁the▁meta▁symbol ▁",
    "x" * 300,
    "the the the the the the the the the the",
    "\u0000control\u0001chars\u007f",
    "\U0001F600" * 5 + "\U00010348 gothic",
]


# Text that spells a special token: HF tokenizers (and the JS port) match added tokens in the raw
# text before normalizing, so "<s>" becomes id 1 there, while SentencePiece encodes the
# characters. A known difference of every Llama-2 tokenizer.json, reported apart.
SPECIAL_TEXT = ["<s> </s> <unk> written as text"]


def corpus():
    import kjv
    train, heldout = kjv.splits()
    tr = train.splitlines()
    return heldout.splitlines() + tr[::20] + EXTRA


def check(model_dir, tokjs, texts=None):
    """-> dict with the counts and the first mismatches."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(model_dir, "tokenizer.model"))
    texts = (corpus() if texts is None else texts) + SPECIAL_TEXT
    want = [[sp.bos_id()] + sp.encode(t) for t in texts]
    with tempfile.TemporaryDirectory() as tmp:
        tp, op = os.path.join(tmp, "texts.json"), os.path.join(tmp, "ids.json")
        with open(tp, "w", encoding="utf-8") as f:
            json.dump(texts, f, ensure_ascii=False)
        subprocess.run(["node", os.path.join(HERE, "encode_tokenizer_json.mjs"), tokjs,
                        model_dir, tp, op], check=True)
        with open(op, encoding="utf-8") as f:
            got = json.load(f)
    mism, special = [], []
    for t, w, g in zip(texts, want, got["ids"]):
        if t in SPECIAL_TEXT:
            special.append({"text": t, "sentencepiece": w, "tokenizer_json": g})
        elif w != g:
            mism.append({"text": t, "sentencepiece": w, "tokenizer_json": g,
                         "sp_pieces": [sp.id_to_piece(i) for i in w],
                         "hf_pieces": [sp.id_to_piece(i) for i in g]})
    return {"package": f"@huggingface/tokenizers@{got['version']}",
            "texts": len(texts) - len(SPECIAL_TEXT),
            "tokens": sum(len(w) for w in want), "extra_texts": len(EXTRA),
            "byte_fallback_texts": sum(1 for w in want if any(3 <= i < 259 for i in w)),
            "mismatches": len(mism), "examples": mism[:10], "special_token_text": special}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokjs", default="/tmp/tokjs")
    ap.add_argument("--json")
    args = ap.parse_args()
    r = check(args.model, args.tokjs)
    print(f"{r['texts']} texts ({r['tokens']} tokens, {r['byte_fallback_texts']} with byte "
          f"fallback): {r['mismatches']} mismatches ({r['package']})")
    for m in r["examples"]:
        print(json.dumps(m, ensure_ascii=False))
    for m in r["special_token_text"]:
        print("text spelling special tokens (HF matches them as added tokens, SentencePiece "
              "does not):", json.dumps(m, ensure_ascii=False))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1, ensure_ascii=False)
    return 1 if r["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
