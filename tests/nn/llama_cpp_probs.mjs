// Runs a GGUF model in llama.cpp (npm's node-llama-cpp, its prebuilt CPU binaries) and writes, for
// each position of a token sequence, the probabilities llama.cpp gives the next token, for
// tests/nn/test_gguf.cpp.
//
//   node tests/nn/llama_cpp_probs.mjs NODE_MODULES MODEL.gguf VOCAB_SIZE IDS.json OUT.json
//
// IDS.json: [id, ...]. OUT.json: {"probs": [[p_0, ..., p_{V-1}] per position]}, from
// LlamaContextSequence.controlledEvaluate with generateNext.probabilities at every position and
// temperature 0 (the probabilities are softmax of the logits).
import fs from "fs";
import path from "path";
import {pathToFileURL} from "url";

const [modules, modelPath, vocabSize, idsPath, outPath] = process.argv.slice(2);
const entry = path.join(modules, "node-llama-cpp", "dist", "index.js");
const {getLlama} = await import(pathToFileURL(entry).href);
const ids = JSON.parse(fs.readFileSync(idsPath, "utf8"));
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const size = Math.max(64, ids.length);
const context = await model.createContext({contextSize: size, batchSize: size, threads: 2});
const sequence = context.getSequence();
const out = await sequence.controlledEvaluate(ids.map(t => [t, {generateNext: {probabilities: true}}]), {temperature: 0});
const probs = out.map(o => {
  const row = new Array(Number(vocabSize)).fill(0);
  for (const [token, p] of o.next.probabilities) row[token] = p;
  return row;
});
fs.writeFileSync(outPath, JSON.stringify({probs}));
await context.dispose();
await model.dispose();
await llama.dispose();
