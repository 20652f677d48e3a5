// Encodes a corpus with @huggingface/tokenizers on the Unigram tokenizer.json folders that
// unigram_reference.py wrote (the reference for attnviz's Unigram support).
//
//   node unigram_reference.mjs NODE_MODULES DIR CORPUS.json
//
// Writes DIR/hf.json: {"<folder>": {"special": [[ids]...], "plain": [[ids]...]}} for DIR/t5 and
// DIR/flan, the corpus encoded with and without the post-processor's </s>.
import fs from 'node:fs';
import path from 'node:path';

const [modules, dir, corpusPath] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf-8'));
const { Tokenizer } = await import(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.mjs'));
const out = {};
for (const name of ['t5', 'flan']) {
  const read = (f) => JSON.parse(fs.readFileSync(path.join(dir, name, f), 'utf-8'));
  const tok = new Tokenizer(read('tokenizer.json'), read('tokenizer_config.json'));
  out[name] = {
    special: corpus.map((t) => tok.encode(t).ids),
    plain: corpus.map((t) => tok.encode(t, { add_special_tokens: false }).ids),
  };
}
fs.writeFileSync(path.join(dir, 'hf.json'), JSON.stringify(out));
