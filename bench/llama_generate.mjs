// One llama.cpp run for bench/llama_compare.py: greedy generation from a prompt on a GGUF model
// (npm's node-llama-cpp, its prebuilt CPU build), timed from the prompt's evaluation to the last
// token, as bench/gpt_generate times nabla.
//
//   node bench/llama_generate.mjs NODE_MODULES MODEL.gguf PROMPT.json NEW_TOKENS THREADS
//
// PROMPT.json: {"prompt": [ids]}. Prints one JSON line: {"seconds", "tokens": [generated ids]}.
import fs from "fs";
import path from "path";
import {pathToFileURL} from "url";

const [modules, modelPath, promptPath, newTokens, threads] = process.argv.slice(2);
const {getLlama} = await import(pathToFileURL(path.join(modules, "node-llama-cpp", "dist", "index.js")).href);
const prompt = JSON.parse(fs.readFileSync(promptPath, "utf8")).prompt;
const n = Number(newTokens);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath});
const size = prompt.length + n + 8;
const context = await model.createContext({contextSize: size, batchSize: Math.max(prompt.length, 64), threads: Number(threads)});
const sequence = context.getSequence();
const tokens = [];
const t0 = process.hrtime.bigint();
for await (const token of sequence.evaluate(prompt, {temperature: 0})) {
  tokens.push(token);
  if (tokens.length >= n) break;
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
console.log(JSON.stringify({seconds, tokens}));
await context.dispose();
await model.dispose();
await llama.dispose();
