// Builds real tokenizer.json files from the vocabularies baked into two npm packages, then encodes
// a corpus with @huggingface/tokenizers (the reference for attnviz's tokenizer.json support).
//
//   node hf_reference.mjs NODE_MODULES OUT_DIR CORPUS.json
//
// Llama 2: llama-tokenizer-js@1.2.2 packs tokenizer.json's model.vocab keys in id order (one per
// line, base64) and model.merges as pairs of vocab positions, best first (its data-conversion.py);
// the package's LlamaTokenizer holds them decoded: vocabById (id -> piece) and merges ("a b" ->
// 2 * rank + 1). Llama 3: llama3-tokenizer-js@1.2.0 packs the same two fields (17-bit positions)
// and appends the 256 special tokens from id 128000 on (Llama 3.1's names and order).
//
// Writes OUT_DIR/<name>/tokenizer.json and tokenizer_config.json for each variant below, and
// OUT_DIR/reference.json: {"<name>": {"special": [[ids]...], "plain": [[ids]...]}}, the corpus
// encoded with and without the special tokens the post-processor adds.
import fs from 'node:fs';
import path from 'node:path';

const [modules, outDir, corpusPath] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf-8'));
const load = async (rel) => (await import(path.join(modules, rel))).default;
const llama2 = await load('llama-tokenizer-js/llama-tokenizer.js');
const llama3 = await load('llama3-tokenizer-js/bundle/llama3-tokenizer-with-baked-data.js');
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));

const META = '\u2581';
const mergesOf = (t) => [...t.merges.entries()].sort((a, b) => a[1] - b[1]).map((e) => e[0]);
const vocabOf = (pieces) => Object.fromEntries(pieces.map((p, i) => [p, i]));
const special = (id, content, extra = {}) => ({
  id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true,
  ...extra,
});
const template = (token, id) => ({
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
  pair: [{ SpecialToken: { id: token, type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: token, type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
  special_tokens: { [token]: { id: token, ids: [id], tokens: [token] } },
});

// ---- Llama 2 (SentencePiece-style BPE with byte fallback) ----
const l2Pieces = llama2.vocabById.slice(0, 32000);
const l2Model = {
  type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null,
  end_of_word_suffix: null, fuse_unk: true, byte_fallback: true, ignore_merges: false,
  vocab: vocabOf(l2Pieces), merges: mergesOf(llama2),  // "a b" strings
};
const l2Added = [special(0, '<unk>'), special(1, '<s>'), special(2, '</s>')];
const l2Config = {
  add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>',
  unk_token: '<unk>', legacy: true, tokenizer_class: 'LlamaTokenizer',
  clean_up_tokenization_spaces: false,
};
const variants = {};
// As meta-llama/Llama-2-7b-hf's tokenizer.json: Prepend + Replace normalizers, no pre-tokenizer.
variants.llama2 = {
  json: {
    version: '1.0', truncation: null, padding: null, added_tokens: l2Added,
    normalizer: { type: 'Sequence', normalizers: [
      { type: 'Prepend', prepend: META },
      { type: 'Replace', pattern: { String: ' ' }, content: META }] },
    pre_tokenizer: null,
    post_processor: template('<s>', 1),
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: META }, content: ' ' }, { type: 'ByteFallback' },
      { type: 'Fuse' }, { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
    model: l2Model,
  },
  config: l2Config,
};
// As transformers converts Llama/Mistral/TinyLlama today (legacy: false): a Metaspace
// pre-tokenizer that prepends only at the start of the text, no split.
variants.llama2_metaspace = {
  json: {
    ...variants.llama2.json, normalizer: null,
    pre_tokenizer: { type: 'Metaspace', replacement: META, prepend_scheme: 'first', split: false },
    decoder: { type: 'Metaspace', replacement: META, prepend_scheme: 'first', split: false },
  },
  config: { ...l2Config, legacy: false },
};

// ---- Llama 3 (byte-level BPE, tiktoken-style regex, ignore_merges) ----
const l3Pieces = llama3.vocabById;
const l3Regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const l3Model = {
  type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null,
  end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true,
  vocab: vocabOf(l3Pieces.slice(0, 128000)),
  merges: mergesOf(llama3).map((m) => m.split(' ')),  // [a, b] arrays
};
const l3Added = l3Pieces.slice(128000).map((p, i) => special(128000 + i, p));
const byteLevel = (extra = {}) => ({
  type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true, ...extra,
});
variants.llama3 = {
  json: {
    version: '1.0', truncation: null, padding: null, added_tokens: l3Added, normalizer: null,
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: l3Regex }, behavior: 'Isolated', invert: false },
      byteLevel({ use_regex: false })] },
    post_processor: { type: 'Sequence', processors: [
      byteLevel({ trim_offsets: false }), template('<|begin_of_text|>', 128000)] },
    decoder: byteLevel(),
    model: l3Model,
  },
  config: { bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>',
    tokenizer_class: 'PreTrainedTokenizerFast', clean_up_tokenization_spaces: true },
};
// Qwen2's recipe on Llama 3's vocabulary: NFC, single digits, no BOS, merges used for every
// piece (no ignore_merges), and two extra added tokens: a non-special one and a special one that
// strips the spaces around it.
const qwenRegex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
variants.qwen2_style = {
  json: {
    ...variants.llama3.json,
    added_tokens: [...l3Added, special(128256, '<think>', { special: false }),
      special(128257, '[MARK]', { lstrip: true, rstrip: true })],
    normalizer: { type: 'NFC' },
    pre_tokenizer: { type: 'Sequence', pretokenizers: [
      { type: 'Split', pattern: { Regex: qwenRegex }, behavior: 'Isolated', invert: false },
      byteLevel({ use_regex: false })] },
    post_processor: byteLevel({ trim_offsets: false, use_regex: false }),
    model: { ...l3Model, ignore_merges: false },
  },
  config: { bos_token: null, eos_token: '<|end_of_text|>', tokenizer_class: 'Qwen2Tokenizer' },
};
// GPT-2's recipe (SmolLM, GPT-2): the ByteLevel pre-tokenizer's own regex.
variants.gpt2_style = {
  json: {
    ...variants.llama3.json,
    pre_tokenizer: byteLevel(),
    post_processor: byteLevel({ trim_offsets: false }),
    model: { ...l3Model, ignore_merges: false },
  },
  config: { bos_token: '<|begin_of_text|>', eos_token: '<|end_of_text|>' },
};

const reference = {};
for (const [name, v] of Object.entries(variants)) {
  const dir = path.join(outDir, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(v.json));
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(v.config));
  const tok = new Tokenizer(v.json, v.config);
  reference[name] = {
    special: corpus.map((t) => tok.encode(t).ids),
    plain: corpus.map((t) => tok.encode(t, { add_special_tokens: false }).ids),
  };
}
fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify(reference));
