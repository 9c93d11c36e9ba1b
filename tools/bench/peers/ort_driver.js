// SPDX-License-Identifier: MIT
// Side-by-side driver for ONNX Runtime (tools/bench/peers/run.py), npm onnxruntime-node (its bundled CPU library).
// Usage: node ort_driver.js MODEL.onnx IDS.i32 N THREADS WARM LOGITS.f32
// Session: CPU execution provider, intra-op threads = THREADS, inter-op 1, sequential execution, all graph
// optimisations. Warmed up twice before the steady-state runs: the first run (timed and reported on its own, so that
// "first" means the same thing for every runtime) and one untimed run. Prints one JSON line.
'use strict';
const fs = require('fs');
const path = require('path');
const ort = require(path.join(process.env.PEERS_NODE_MODULES || 'node_modules', 'onnxruntime-node'));

async function main() {
  const [model, idsPath, nText, threadsText, warmText, out] = process.argv.slice(2);
  const n = Number(nText), threads = Number(threadsText), warm = Number(warmText);
  const raw = fs.readFileSync(idsPath);
  const ids32 = new Int32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4).subarray(0, n);
  const ids = BigInt64Array.from(ids32, (v) => BigInt(v));
  const t0 = performance.now();
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const t1 = performance.now();
  const feeds = { ids: new ort.Tensor('int64', ids, [n]) };
  const times = [];
  let result;
  const run = async () => {
    const a = performance.now();
    result = await session.run(feeds);
    return performance.now() - a;
  };
  times.push(await run());      // first run
  await run();                  // second warm-up
  for (let r = 0; r < warm; ++r) times.push(await run());
  const logits = result.logits.data;
  fs.writeFileSync(out, Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength));
  console.log(JSON.stringify({ load_ms: t1 - t0, first_ms: times[0], warm_ms: times.slice(1), version: ort.env.versions.common }));
}
main().catch((e) => { console.error(e); process.exit(1); });
