// The official OpenAI Node SDK against a real `redline serve` process:
// chat and completions, streaming and not, error cases, /v1/models, a config
// file, and a graceful SIGTERM at the end.
//
//   node openai_sdk_test.mjs --redline path/to/redline --workdir DIR
//
// Exit codes: 0 pass, 1 fail, 77 skipped (the `openai` module is not
// installed; scripts/setup.sh runs `npm ci` here). Loopback only, port 0,
// every wait bounded.
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const args = process.argv.slice(2);
const arg = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const redline = arg('--redline');
const workdir = path.resolve(arg('--workdir', 'node_work'));
if (!redline) {
  console.error('usage: node openai_sdk_test.mjs --redline BIN --workdir DIR');
  process.exit(2);
}

let OpenAI;
try {
  ({ default: OpenAI } = await import('openai'));
} catch (e) {
  console.log(`SKIP: the openai npm module is not installed (${e.message}); run npm ci in ${import.meta.dirname}`);
  process.exit(77);
}

fs.rmSync(workdir, { recursive: true, force: true });
fs.mkdirSync(workdir, { recursive: true });
const model = path.join(workdir, 'tiny.gguf');
execFileSync(redline, ['make-model', '--preset', 'tiny', '--type', 'q8_0', '-o', model], { stdio: 'inherit' });

// Flags through a config file (CLI11 TOML/INI), model on the command line.
const portFile = path.join(workdir, 'port.txt');
const config = path.join(workdir, 'serve.toml');
fs.writeFileSync(config, [
  'port = 0',
  `port-file = "${portFile}"`,
  'api-key = ["sdk-key", "second-key"]',
  'parallel = 4',
  'alias = "tiny"',
  'sse-ping-interval = 1',
  'shutdown-grace = 10',
  '',
].join('\n'));

const log = fs.openSync(path.join(workdir, 'serve.log'), 'w');
const server = spawn(redline, ['serve', '--config', config, '-m', model], { stdio: ['ignore', log, log] });
let exited = null;
const exitPromise = new Promise((resolve) => server.on('exit', (code, signal) => {
  exited = { code, signal };
  resolve(exited);
}));

async function waitFor(fn, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (exited) throw new Error(`server exited early (${JSON.stringify(exited)}) while waiting for ${what}`);
    try {
      if (await fn()) return;
    } catch { /* not yet */ }
    await sleep(25);
  }
  throw new Error(`timed out waiting for ${what}`);
}

const failures = [];
async function test(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures.push(name);
    console.log(`FAIL ${name}\n     ${e.stack || e}`);
  }
}

try {
  await waitFor(() => fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim() !== '', 30000, 'port file');
  const port = Number(fs.readFileSync(portFile, 'utf8').trim());
  const base = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, 60000, '/readyz 200');

  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sdk-key', maxRetries: 0, timeout: 60000 });
  const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Say hello.' }];

  let chatText = '';
  await test('chat.completions.create (non-streaming)', async () => {
    const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 8, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 8);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 8);
    chatText = r.choices[0].message.content;
  });

  await test('chat.completions.create (streaming, include_usage)', async () => {
    const stream = await client.chat.completions.create({
      model: 'tiny', messages, max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.equal(chunk.object, 'chat.completion.chunk');
      for (const c of chunk.choices) {
        text += c.delta?.content ?? '';
        if (c.finish_reason) finish = c.finish_reason;
      }
      if (chunk.usage) usage = chunk.usage;
    }
    assert.ok(chunks >= 3, `only ${chunks} chunks`);
    assert.equal(text, chatText);
    assert.equal(finish, 'length');
    assert.equal(usage?.completion_tokens, 8);
  });

  await test('chat.completions.stream helper (finalChatCompletion)', async () => {
    const runner = client.chat.completions.stream({ model: 'tiny', messages, max_tokens: 8, temperature: 0 });
    const final = await runner.finalChatCompletion();
    assert.equal(final.choices[0].message.content, chatText);
  });

  let completionText = '';
  await test('completions.create (non-streaming)', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time', max_tokens: 6, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.choices[0].text, 'string');
    assert.equal(r.usage.completion_tokens, 6);
    completionText = r.choices[0].text;
  });

  await test('completions.create (streaming)', async () => {
    const stream = await client.completions.create({
      model: 'tiny', prompt: 'Once upon a time', max_tokens: 6, temperature: 0, stream: true,
    });
    let text = '';
    for await (const chunk of stream) text += chunk.choices.map((c) => c.text).join('');
    assert.equal(text, completionText);
  });

  await test('completions.create with token ids', async () => {
    const r = await client.completions.create({ model: 'tiny', prompt: [1, 17, 42], max_tokens: 3, temperature: 0 });
    assert.equal(r.usage.prompt_tokens, 3);
  });

  await test('models.list', async () => {
    const page = await client.models.list();
    assert.deepEqual(page.data.map((m) => m.id), ['tiny']);
  });

  await test('models.retrieve', async () => {
    const m = await client.models.retrieve('tiny');
    assert.equal(m.id, 'tiny');
    assert.equal(m.object, 'model');
    await assert.rejects(client.models.retrieve('gpt-nope'), (e) => e instanceof OpenAI.NotFoundError);
  });

  await test('a tool conversation: assistant content null with tool_calls', async () => {
    const r = await client.chat.completions.create({
      model: 'tiny',
      max_tokens: 3,
      temperature: 0,
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
    });
    assert.equal(r.choices.length, 1);
    assert.ok(r.usage.prompt_tokens > 0);
  });

  await test('error: unknown model -> NotFoundError 404', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-nope', messages, max_tokens: 2 }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.param === 'model',
    );
  });

  await test('error: bad parameter -> BadRequestError 400 naming the param', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny', messages, max_tokens: 2, temperature: 'hot' }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature'
        && e.type === 'invalid_request_error',
    );
  });

  await test('error: context exceeded -> 400 context_length_exceeded', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny', messages, max_tokens: 1000000 }),
      (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded',
    );
  });

  await test('error: wrong API key -> AuthenticationError 401', async () => {
    const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  });

  await test('second key from the config file works', async () => {
    const other = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'second-key', maxRetries: 0 });
    const r = await other.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 1 });
    assert.equal(r.choices.length, 1);
  });

  await test('SIGTERM drains and exits 0', async () => {
    // A request in flight when the signal arrives still completes.
    const inflight = client.completions.create({ model: 'tiny', prompt: 'long', max_tokens: 200, temperature: 0 });
    await sleep(50);
    server.kill('SIGTERM');
    const r = await inflight;
    assert.equal(r.usage.completion_tokens, 200);
    const result = await Promise.race([exitPromise, sleep(30000).then(() => null)]);
    assert.ok(result, 'server did not exit within 30 s of SIGTERM');
    assert.equal(result.code, 0);
  });
} catch (e) {
  failures.push(`setup: ${e.message}`);
  console.log(`FAIL setup\n     ${e.stack || e}`);
} finally {
  if (!exited) {
    server.kill('SIGKILL');
    await exitPromise;
  }
}

if (failures.length) {
  console.log(`\n${failures.length} failure(s); server log: ${path.join(workdir, 'serve.log')}`);
  console.log(fs.readFileSync(path.join(workdir, 'serve.log'), 'utf8').split('\n').slice(-30).join('\n'));
  process.exit(1);
}
console.log('\nall OpenAI SDK checks passed');
process.exit(0);  // do not wait for pending timers
