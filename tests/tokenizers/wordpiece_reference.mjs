// WordPiece (BERT) references: tokenizer.json files built on a given vocab.txt, and a corpus
// encoded by @huggingface/tokenizers (the JS port of Hugging Face's tokenizers), singly and in
// pairs, with the token type ids.
//
//   node wordpiece_reference.mjs NODE_MODULES OUT_DIR VOCAB.txt CORPUS.json
//
// VOCAB.txt has one token per line (id = line number). Writes OUT_DIR/<variant>/tokenizer.json
// for each variant below and OUT_DIR/reference.json:
//   {"<variant>": {"special": [[ids]...], "plain": [[ids]...],
//                  "pair": [{"ids": [...], "types": [...]}...], "pairPlain": [...]}}
// where pair i is (corpus[i], corpus[(i + 1) % n]).
import fs from 'node:fs';
import path from 'node:path';

const [modules, outDir, vocabPath, corpusPath] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf-8'));
const lines = fs.readFileSync(vocabPath, 'utf-8').split('\n');
if (lines.length && lines[lines.length - 1] === '') lines.pop();
const vocab = Object.fromEntries(lines.map((t, i) => [t, i]));
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));

const id = (t) => {
  if (!(t in vocab)) throw new Error(`${t} is not in ${vocabPath}`);
  return vocab[t];
};
const special = (t) => ({
  id: id(t), content: t, single_word: false, lstrip: false, rstrip: false, normalized: false,
  special: true,
});
const item = (kind, name, typeId) => ({ [kind]: { id: name, type_id: typeId } });
const bertTemplate = {
  type: 'TemplateProcessing',
  single: [item('SpecialToken', '[CLS]', 0), item('Sequence', 'A', 0), item('SpecialToken', '[SEP]', 0)],
  pair: [item('SpecialToken', '[CLS]', 0), item('Sequence', 'A', 0), item('SpecialToken', '[SEP]', 0),
    item('Sequence', 'B', 1), item('SpecialToken', '[SEP]', 1)],
  special_tokens: {
    '[CLS]': { id: '[CLS]', ids: [id('[CLS]')], tokens: ['[CLS]'] },
    '[SEP]': { id: '[SEP]', ids: [id('[SEP]')], tokens: ['[SEP]'] },
  },
};
const normalizer = (extra = {}) => ({
  type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null,
  lowercase: true, ...extra,
});
const model = (extra = {}) => ({
  type: 'WordPiece', unk_token: '[UNK]', continuing_subword_prefix: '##',
  max_input_chars_per_word: 100, vocab, ...extra,
});
// As bert-base-uncased's tokenizer.json.
const base = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map(special),
  normalizer: normalizer(), pre_tokenizer: { type: 'BertPreTokenizer' },
  post_processor: bertTemplate,
  decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
  model: model(),
};
const variants = {
  uncased: base,
  // Cased (strip_accents follows lowercase: off).
  cased: { ...base, normalizer: normalizer({ lowercase: false }) },
  // Lowercase but keep the accents.
  keep_accents: { ...base, normalizer: normalizer({ strip_accents: false }) },
  // Strip accents without lowercasing; CJK left as they are; words over 12 characters are [UNK].
  strip_only: {
    ...base, normalizer: normalizer({ lowercase: false, strip_accents: true, handle_chinese_chars: false }),
    model: model({ max_input_chars_per_word: 12 }),
  },
  // The older post-processors.
  bert_processing: {
    ...base, post_processor: { type: 'BertProcessing', sep: ['[SEP]', id('[SEP]')], cls: ['[CLS]', id('[CLS]')] },
  },
  roberta_processing: {
    ...base,
    post_processor: {
      type: 'RobertaProcessing', sep: ['[SEP]', id('[SEP]')], cls: ['[CLS]', id('[CLS]')],
      trim_offsets: true, add_prefix_space: false,
    },
  },
};

const encode = (tok, a, b, add) => {
  const e = tok.encode(a, { text_pair: b, add_special_tokens: add, return_token_type_ids: true });
  return { ids: e.ids, types: e.token_type_ids ?? e.ids.map(() => 0) };
};
const reference = {};
for (const [name, json] of Object.entries(variants)) {
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(json));
  const tok = new Tokenizer(json, {});
  const pairs = corpus.map((t, i) => [t, corpus[(i + 1) % corpus.length]]);
  reference[name] = {
    special: corpus.map((t) => tok.encode(t).ids),
    plain: corpus.map((t) => tok.encode(t, { add_special_tokens: false }).ids),
    pair: pairs.map(([a, b]) => encode(tok, a, b, true)),
    pairPlain: pairs.map(([a, b]) => encode(tok, a, b, false)),
  };
}
fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify(reference));
