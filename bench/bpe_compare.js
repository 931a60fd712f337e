// Encoding speed of the npm references on the corpus bench/bpe_speed.cpp reads, single thread,
// in MB/s of UTF-8 input:
//   node bench/bpe_compare.js <node_modules dir> CORPUS.jsonl [SECONDS] [TOKENIZER.json ...]
// Each TOKENIZER.json is measured through @huggingface/tokenizers (Tokenizers.js), encode with the
// special tokens, as bench/bpe_speed.cpp measures nabla's HfTokenizer.
'use strict';
const fs = require('fs');
const path = require('path');
const modules = path.resolve(process.argv[2]);
const corpus = fs.readFileSync(process.argv[3], 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
const minSeconds = Number(process.argv[4] || 3);

function bench(name, encode, docs = corpus) {
  const bytes = docs.reduce((n, s) => n + Buffer.byteLength(s, 'utf8'), 0);
  let tokens = 0;
  for (const s of docs) tokens += encode(s).length;  // warm-up (also fills gpt-3-encoder's cache)
  let passes = 0;
  const t0 = process.hrtime.bigint();
  let dt = 0;
  do {
    for (const s of docs) encode(s);
    ++passes;
    dt = Number(process.hrtime.bigint() - t0) / 1e9;
  } while (dt < minSeconds);
  console.log(`${name.padEnd(22)} ${(bytes * passes / dt / 1e6).toFixed(2).padStart(8)} MB/s  (${passes} passes, ` +
              `${tokens} tokens per pass, ${dt.toFixed(2)} s)`);
}

const req = (n) => { try { return require(path.join(modules, n)); } catch (e) { return null; } };
const jstk = req('js-tiktoken');
const tk = req('tiktoken');
const gpt3 = req('gpt-3-encoder');
const all = [corpus.join('\n') + '\n'];
if (tk) {
  const r50k = tk.get_encoding('r50k_base');
  const cl100k = tk.get_encoding('cl100k_base');
  bench('tiktoken(wasm) r50k', (s) => r50k.encode_ordinary(s));
  bench('tiktoken(wasm) cl100k', (s) => cl100k.encode_ordinary(s));
  bench('tiktoken r50k one doc', (s) => r50k.encode_ordinary(s), all);
  bench('tiktoken cl100k one doc', (s) => cl100k.encode_ordinary(s), all);
  // the same 100 kB word as bench/bpe_speed.cpp (same generator)
  let word = '';
  let x = 1;
  for (let i = 0; i < 100000; ++i) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    word += String.fromCharCode(97 + ((x >>> 16) % 26));
  }
  bench('tiktoken r50k 100kB word', (s) => r50k.encode_ordinary(s), [word], 0);
}
if (jstk) {
  const r50k = jstk.getEncoding('r50k_base');
  const cl100k = jstk.getEncoding('cl100k_base');
  bench('js-tiktoken r50k', (s) => r50k.encode(s, [], []));
  bench('js-tiktoken cl100k', (s) => cl100k.encode(s, [], []));
}
if (gpt3) bench('gpt-3-encoder', (s) => gpt3.encode(s));
const hf = process.argv.length > 5 ? require(path.join(modules, '@huggingface/tokenizers/dist/tokenizers.cjs')) : null;
for (const file of process.argv.slice(5)) {
  const tok = new hf.Tokenizer(JSON.parse(fs.readFileSync(file, 'utf8')), {clean_up_tokenization_spaces: false});
  bench('tokenizers.js ' + path.basename(file, '.json'), (s) => tok.encode(s).ids);
}
