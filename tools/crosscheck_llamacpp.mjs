// Greedy decode with llama.cpp (via node-llama-cpp prebuilt binaries) from exact token ids.
import {getLlama} from "node-llama-cpp";
const [modelPath, idsCsv, nStr, threadsStr] = process.argv.slice(2);
const n = parseInt(nStr || "32");
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const ctx = await model.createContext({contextSize: 512, threads: parseInt(threadsStr || "2"), batchSize: 512});
const seq = ctx.getSequence();
const ids = idsCsv.split(",").map(Number);
const out = [];
const t0 = performance.now();
let tFirst = 0;
for await (const tok of seq.evaluate(ids, {temperature: 0})) {
  if (out.length === 0) tFirst = performance.now();
  out.push(tok);
  if (out.length >= n) break;
}
const t1 = performance.now();
console.log(out.join(" "));
console.error(`llama.cpp: ttft ${(tFirst - t0).toFixed(1)} ms, decode ${((out.length - 1) * 1000 / (t1 - tFirst)).toFixed(2)} tok/s`);
process.exit(0);
