"""A small WordPiece vocabulary for kjv-wp-bert, learned here from the training split, and the
files a BERT folder carries for it: vocab.txt (one piece a line, the line number is the id),
tokenizer.json (HF tokenizers' layout: BertNormalizer, BertPreTokenizer, the WordPiece model,
a TemplateProcessing post-processor for one text and for a pair with token type ids) and
tokenizer_config.json.

The text is normalized as BertNormalizer does with lowercase on (lower case, accents stripped,
control characters dropped), split at whitespace and at every punctuation character (each is a
word of its own), and each word cut into pieces longest-match-first, a piece after the first
written with the "##" prefix. The vocabulary is learned the way HF's WordPiece trainer learns
one: byte-pair merges over the words of the training split (counted once per occurrence), the
first symbol of a word bare and the rest "##" symbols, the most frequent adjacent pair merged
until the vocabulary holds VOCAB_SIZE entries (ties broken by the pair's text, so the result
does not depend on dictionary order).
"""
import collections
import json
import os
import unicodedata

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PAD, UNK, CLS, SEP, MASK = range(5)
VOCAB_SIZE = 3000
PREFIX = "##"
MAX_WORD_CHARS = 100


def _is_punct(ch):
    c = ord(ch)
    if 33 <= c <= 47 or 58 <= c <= 64 or 91 <= c <= 96 or 123 <= c <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def normalize(text):
    """BertNormalizer(clean_text, handle_chinese_chars, lowercase, strip_accents=lowercase),
    for the text this model sees (the KJV is ASCII; the general rules are kept anyway)."""
    out = []
    for ch in text:
        c = ord(ch)
        if c == 0 or c == 0xFFFD or (unicodedata.category(ch).startswith("C")
                                     and ch not in "\t\n\r"):
            continue
        out.append(" " if ch in "\t\n\r" or unicodedata.category(ch) == "Zs" else ch)
    text = "".join(out).lower()
    text = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")


def words(text):
    """BertPreTokenizer: split at whitespace, every punctuation character a word of its own."""
    out = []
    for chunk in normalize(text).split():
        cur = ""
        for ch in chunk:
            if _is_punct(ch):
                if cur:
                    out.append(cur)
                out.append(ch)
                cur = ""
            else:
                cur += ch
        if cur:
            out.append(cur)
    return out


def train(lines, size=VOCAB_SIZE):
    """-> the vocabulary as a list of pieces (id = index)."""
    counts = collections.Counter(w for line in lines for w in words(line))
    wl = sorted(counts)  # a fixed order
    freq = [counts[w] for w in wl]
    syms = [[w[0]] + [PREFIX + c for c in w[1:]] for w in wl]
    alphabet = sorted({s for ss in syms for s in ss})
    vocab = SPECIALS + alphabet
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, ss in enumerate(syms):
        for a, b in zip(ss, ss[1:]):
            pairs[(a, b)] += freq[i]
            where[(a, b)].add(i)
    while len(vocab) < size and pairs:
        (a, b), n = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if n <= 0:
            break
        merged = a + b[len(PREFIX):]
        vocab.append(merged)
        for i in sorted(where.pop((a, b), ())):
            ss = syms[i]
            for x, y in zip(ss, ss[1:]):
                pairs[(x, y)] -= freq[i]
            new, k = [], 0
            while k < len(ss):
                if k + 1 < len(ss) and ss[k] == a and ss[k + 1] == b:
                    new.append(merged)
                    k += 2
                else:
                    new.append(ss[k])
                    k += 1
            syms[i] = new
            for x, y in zip(new, new[1:]):
                pairs[(x, y)] += freq[i]
                where[(x, y)].add(i)
        pairs = collections.Counter({p: c for p, c in pairs.items() if c > 0})
    return vocab


class WordPiece:
    def __init__(self, vocab):
        self.vocab = list(vocab)
        self.id = {p: i for i, p in enumerate(self.vocab)}

    def word_ids(self, w):
        if len(w) > MAX_WORD_CHARS:
            return [UNK]
        ids, start = [], 0
        while start < len(w):
            end, found = len(w), None
            while end > start:
                piece = w[start:end] if start == 0 else PREFIX + w[start:end]
                if piece in self.id:
                    found = self.id[piece]
                    break
                end -= 1
            if found is None:
                return [UNK]
            ids.append(found)
            start = end
        return ids

    def encode(self, text):
        """-> the pieces' ids, no specials."""
        return [i for w in words(text) for i in self.word_ids(w)]

    def single(self, text):
        return [CLS] + self.encode(text) + [SEP]


def write(out_dir, vocab, max_len):
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("".join(p + "\n" for p in vocab))
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {s: {"id": s, "ids": [SPECIALS.index(s)], "tokens": [s]}
                               for s in ("[CLS]", "[SEP]")}},
        "decoder": {"type": "WordPiece", "prefix": PREFIX, "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": PREFIX,
                  "max_input_chars_per_word": MAX_WORD_CHARS,
                  "vocab": {p: i for i, p in enumerate(vocab)}},
    }
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, indent=1, ensure_ascii=False)
        f.write("\n")
    cfg = {"tokenizer_class": "BertTokenizer", "do_lower_case": True, "strip_accents": None,
           "tokenize_chinese_chars": True, "unk_token": "[UNK]", "sep_token": "[SEP]",
           "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
           "model_max_length": max_len, "clean_up_tokenization_spaces": True}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)
        f.write("\n")
