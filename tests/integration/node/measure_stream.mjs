// Single-stream TTFT / decode rate and aggregate tok/s at several
// concurrencies through `redline serve`'s HTTP API (streaming completions
// with a token-id prompt, so prompt length is exact). Not a test: the
// figures docs/SERVER.md quotes, measured next to `redline bench-model`.
//
//   node measure_stream.mjs --url http://127.0.0.1:PORT [--prompt-tokens 128]
//        [--max-tokens 64] [--repeats 3] [--concurrency 1,4,8] [--vocab 49152]
//
// TTFT = request sent -> first chunk with non-empty text
// (docs/METRICS.md#latencies);
// decode tok/s = (N - 1) / (last - first content chunk).
const args = process.argv.slice(2);
const arg = (n, d) => (args.indexOf(n) >= 0 ? args[args.indexOf(n) + 1] : d);
const url = arg('--url', 'http://127.0.0.1:8080');
const promptTokens = Number(arg('--prompt-tokens', 128));
const maxTokens = Number(arg('--max-tokens', 64));
const repeats = Number(arg('--repeats', 3));
const vocab = Number(arg('--vocab', 49152));
const levels = arg('--concurrency', '1,4,8').split(',').map(Number);

let seed = 1;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const prompt = () => Array.from({ length: promptTokens }, () => 100 + Math.floor(rand() * (vocab - 200)));

async function one() {
  const body = JSON.stringify({
    prompt: prompt(), max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
  });
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buf = '';
  let first = 0;
  let last = 0;
  let chunks = 0;
  let tokens = 0;
  for await (const piece of res.body) {
    buf += decoder.decode(piece, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!ev.startsWith('data: ') || ev === 'data: [DONE]') continue;
      const v = JSON.parse(ev.slice(6));
      const text = v.choices?.[0]?.text ?? '';
      if (text.length > 0) {
        const now = performance.now();
        if (!first) first = now;
        last = now;
        chunks++;
      }
    }
  }
  tokens = maxTokens;
  const end = performance.now();
  return { ttft_ms: first - t0, decode_tps: (chunks - 1) / ((last - first) / 1000), e2e_ms: end - t0, tokens };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

await one();  // warm the connection pool and caches
const singles = [];
for (let r = 0; r < repeats; r++) singles.push(await one());
console.log(`single stream (${promptTokens}-token prompt, ${maxTokens} tokens), median of ${repeats}:`);
console.log(`  TTFT ${median(singles.map((s) => s.ttft_ms)).toFixed(0)} ms, decode ${median(singles.map((s) => s.decode_tps)).toFixed(2)} tok/s`);
for (const c of levels) {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: c }, () => one()));
  const secs = (performance.now() - t0) / 1000;
  const total = results.reduce((a, r) => a + r.tokens, 0);
  console.log(`  concurrency ${c}: ${total} tokens in ${secs.toFixed(2)} s = ${(total / secs).toFixed(2)} tok/s aggregate; ` +
    `TTFT median ${median(results.map((r) => r.ttft_ms)).toFixed(0)} ms, per-stream decode median ` +
    `${median(results.map((r) => r.decode_tps)).toFixed(2)} tok/s`);
}
