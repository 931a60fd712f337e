// The ONNX Runtime side of bench/onnx_speed.cpp: loads a model once, then answers each stdin line
// "<batch> <calls>" with the seconds per session.run of `calls` calls on a (batch, ...SAMPLE_DIMS)
// input, so the C++ program can interleave its own timings with ONNX Runtime's.
//
//   NABLA_ORT_DIR=.deps/onnxruntime node bench/onnx_ort_server.js model.onnx THREADS 1,28,28
'use strict';
const path = require('path');
const readline = require('readline');
const ort = require(path.join(process.env.NABLA_ORT_DIR || process.cwd(), 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, threads, sampleDims] = process.argv.slice(2);
  const sample = sampleDims.split(',').map(Number);
  const per = sample.reduce((a, b) => a * b, 1);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: Number(threads), interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const name = session.inputNames[0];
  const inputs = new Map();
  const rl = readline.createInterface({input: process.stdin});
  process.stdout.write('ready\n');
  for await (const line of rl) {
    const [batch, calls] = line.trim().split(/\s+/).map(Number);
    if (!inputs.has(batch)) {
      const data = Float32Array.from({length: batch * per}, () => Math.random());
      inputs.set(batch, {[name]: new ort.Tensor('float32', data, [batch, ...sample])});
    }
    const feeds = inputs.get(batch);
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < calls; ++i) await session.run(feeds);
    const dt = Number(process.hrtime.bigint() - t0) / 1e9;
    process.stdout.write(`${dt / calls}\n`);
  }
}

main().catch((e) => {
  process.stderr.write(`onnx_ort_server.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
