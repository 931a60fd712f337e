// Runs ONNX models in ONNX Runtime (onnxruntime-node, CPU) for tests/onnx/test_export.cpp and the ONNX
// benchmark: one Node process for many models, since starting one costs ~0.2 s.
//
//   node run_ort.js jobs.json
//
// jobs.json: [{"model": "a.onnx", "runs": [{"inputs": [{"name": "input", "file": "x.bin",
//              "dtype": "float32", "dims": [2, 1, 28, 28]}], "output": "y.bin"}]}, ...]
// Each run writes its first output's raw little-endian data to `output` and its dims and type to
// `output`.json. A job with "keep_going": true that fails (the model does not load, a run throws)
// writes the error to `output`.error for each of its runs and the script goes on with the next job. Inputs are raw little-endian files of float32, float64, int64, int32, uint8 or bool.
// NABLA_ORT_DIR names the folder holding node_modules/onnxruntime-node (default: the cwd's).
'use strict';
const fs = require('fs');
const path = require('path');

const ortDir = process.env.NABLA_ORT_DIR || process.cwd();
const ort = require(path.join(ortDir, 'node_modules', 'onnxruntime-node'));

const arrays = {
  float32: Float32Array, float64: Float64Array, int64: BigInt64Array, int32: Int32Array,
  uint8: Uint8Array, bool: Uint8Array,
};

async function main() {
  const jobs = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
  for (const job of jobs) {
    if (job.keep_going) {
      try {
        await runJob(job);
      } catch (e) {
        for (const run of job.runs) fs.writeFileSync(run.output + '.error', String(e && e.message ? e.message : e));
      }
    } else {
      await runJob(job);
    }
  }
}

async function runJob(job) {
  const session = await ort.InferenceSession.create(job.model, {
    intraOpNumThreads: job.threads || 1, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  for (const run of job.runs) {
    const feeds = {};
    for (const inp of run.inputs) {
      const buf = fs.readFileSync(inp.file);
      const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
      const T = arrays[inp.dtype];
      if (!T) throw new Error(`run_ort.js: unsupported input dtype ${inp.dtype}`);
      feeds[inp.name] = new ort.Tensor(inp.dtype, new T(ab), inp.dims);
    }
    const result = await session.run(feeds);
    const out = result[session.outputNames[0]];
    const data = out.data;
    fs.writeFileSync(run.output, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    fs.writeFileSync(run.output + '.json', JSON.stringify({dims: out.dims, type: out.type}));
  }
}

main().catch((e) => {
  process.stderr.write(`run_ort.js: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
