// An OpenAI Chat Completions streaming adapter in plain Node (18+: fetch and web streams, no npm
// packages), written as a TypeScript adapter of the dsh harness would be: GenerateOptions in,
// StreamChunks out (docs/protocol.md). It is what `dsh-replay serve`, `serve --record`, `conform
// --command` and `golden check` are exercised with (examples/node/README.md has the whole loop).
//
//   node stream.mjs BASE_URL                      # the text of the answer, as it streams
//   node stream.mjs BASE_URL --jsonl              # StreamChunk JSONL; an error as a last "raised" line
//   node stream.mjs BASE_URL --jsonl --options options.json --read-timeout 10
//
// BASE_URL is the OpenAI base URL as the SDKs take it (https://api.openai.com/v1); one that does not
// end in /v1 gets it (http://127.0.0.1:PORT, or http://127.0.0.1:PORT/_dsh/openai/text/-). The request is built from --options (GenerateOptions as JSON, as a cassette's metadata
// holds them), by default the one of cassettes/openai/text.yaml. The key comes from OPENAI_API_KEY.
// It mirrors dsh_replay.adapters.OpenAIChatAdapter: the same request body, block sequencing, usage,
// finish, errors (their class names are dsh_replay's), two retries before the first byte.

import { readFileSync } from "node:fs";

const DEFAULT_OPTIONS = {
  model: "gpt-4.1-mini",
  messages: [
    { role: "system", content: "You are a concise assistant. Answer in one or two sentences." },
    { role: "user", content: "Say hello." },
  ],
};
const ROUTE = "openai";
const MAX_RETRIES = 2; // as dsh_replay's RetryPolicy: retries before the first byte only
const MAX_RETRY_WAIT = 8; // seconds: a longer Retry-After gives up instead of retrying early

function parseArgs(argv) {
  const args = { baseUrl: null, jsonl: false, options: null, readTimeout: 60 };
  for (let i = 0; i < argv.length; i++) {
    const word = argv[i];
    if (word === "--jsonl") args.jsonl = true;
    else if (word === "--options") args.options = argv[++i];
    else if (word === "--read-timeout") args.readTimeout = Number(argv[++i]);
    else if (!word.startsWith("--") && args.baseUrl === null) args.baseUrl = word;
    else throw new Error(`unknown argument ${word}`);
  }
  if (!args.baseUrl || !(args.readTimeout > 0)) throw new Error("a BASE_URL and a --read-timeout above 0 are needed");
  return args;
}

// -- request mapping ---------------------------------------------------------------------------

function chatMessage(m) {
  if (m.role === "tool") return { role: "tool", tool_call_id: m.callId, content: m.content ?? "" };
  const out = { role: m.role, content: m.content ?? "" };
  if (m.toolCalls?.length) {
    out.content = m.content || null; // an assistant turn that only called tools has content null
    out.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments ?? "{}" } }));
  }
  if (m.name) out.name = m.name;
  return out;
}

function requestBody(options) {
  const body = { model: options.model, messages: options.messages.map(chatMessage), stream: true, stream_options: { include_usage: true } };
  if (options.tools?.length) {
    body.tools = options.tools.map((t) => ({ type: "function", function: { name: t.name, description: t.description ?? "", parameters: t.parameters ?? { type: "object", properties: {} } } }));
  }
  if (options.temperature != null) body.temperature = options.temperature;
  if (options.maxTokens != null) body.max_completion_tokens = options.maxTokens;
  for (const [key, value] of Object.entries(options.extra ?? {})) {
    // objects merge one level deep; null removes a field
    if (value === null) delete body[key];
    else if (isObject(body[key]) && isObject(value)) body[key] = { ...body[key], ...value };
    else body[key] = value;
  }
  return body;
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

// -- errors: dsh_replay's classes, by name ---------------------------------------------------

class AdapterError extends Error {
  constructor(kind, message, facts = {}) {
    const shown = Object.entries({ route: ROUTE, ...facts }).filter(([, v]) => v != null).map(([k, v]) => `${k}=${v}`);
    super(`${message} (${shown.join(", ")})`);
    this.kind = kind;
    this.status = facts.status ?? null;
    this.code = facts.code ?? null;
  }
}

const BY_CODE = {};
for (const [kind, codes] of Object.entries({
  OverloadedError: "overloaded_error overloaded",
  RateLimitError: "rate_limit_error rate_limit_exceeded resource_exhausted insufficient_quota",
  AuthenticationError: "authentication_error permission_error invalid_api_key unauthenticated permission_denied unauthorized api_key_invalid",
  InvalidRequestError: "invalid_request_error not_found_error request_too_large invalid_argument failed_precondition out_of_range not_found context_length_exceeded model_not_found",
  ServerError: "api_error server_error internal internal_error unavailable deadline_exceeded",
})) for (const code of codes.split(" ")) BY_CODE[code] = kind;

function kindForStatus(status) {
  if (status === 401 || status === 403) return "AuthenticationError";
  if (status === 429) return "RateLimitError";
  if (status === 529) return "OverloadedError";
  if ([400, 404, 409, 413, 422].includes(status)) return "InvalidRequestError";
  if (status >= 500 && status <= 599) return "ServerError";
  return null;
}

function errorFrom(payload, status = null, requestId = null) {
  let inner = isObject(payload) ? payload.error ?? payload : payload;
  if (typeof inner === "string") return new AdapterError(kindForStatus(status) ?? "ProviderError", inner, { status, request_id: requestId });
  if (!isObject(inner)) inner = { message: String(payload) };
  const codes = [inner.code, inner.type, inner.status].filter((c) => typeof c === "string" && c);
  const byCode = codes.map((c) => BY_CODE[c.toLowerCase()]).find(Boolean) ?? null;
  const byStatus = status != null ? kindForStatus(status) : null;
  let kind = byStatus ?? byCode ?? (Number.isInteger(inner.code) ? kindForStatus(inner.code) : null) ?? "ProviderError";
  if ((byStatus === "ServerError" && byCode === "OverloadedError") || (byStatus === "InvalidRequestError" && byCode === "AuthenticationError")) kind = byCode;
  let message = typeof inner.message === "string" && inner.message ? inner.message : JSON.stringify(payload);
  if (kind === "AuthenticationError") message += "; check the API key given to the adapter";
  return new AdapterError(kind, message, { status, code: codes[0], request_id: requestId ?? payload?.request_id });
}

// -- transport: retries before the first byte, a read timeout for every wait -----------------

function retryWait(headers, attempt) {
  const ms = Number(headers.get("retry-after-ms"));
  if (headers.has("retry-after-ms") && Number.isFinite(ms)) return Math.max(0, ms / 1000);
  const seconds = Number(headers.get("retry-after"));
  if (headers.has("retry-after") && Number.isFinite(seconds)) return Math.max(0, seconds);
  return Math.min(MAX_RETRY_WAIT, 0.5 * 2 ** attempt) * Math.random();
}

class Reader {
  // one read timeout, restarted before every wait: headers, then each piece of the body
  constructor(seconds) {
    this.seconds = seconds;
    this.controller = new AbortController();
    this.timedOut = false;
  }
  async wait(promise) {
    const timer = setTimeout(() => { this.timedOut = true; this.controller.abort(); }, this.seconds * 1000);
    try {
      return await promise;
    } catch (error) {
      if (this.timedOut) throw new AdapterError("StreamTimeoutError", `the stream sent nothing for ${this.seconds}s`);
      if (error instanceof AdapterError) throw error;
      const cause = error.cause?.code ?? error.cause?.message ?? error.message;
      throw new AdapterError("StreamInterruptedError", `the connection broke: ${cause}`);
    } finally {
      clearTimeout(timer);
    }
  }
}

async function open(url, body, key, reader) {
  for (let attempt = 0; ; attempt++) {
    const init = {
      method: "POST", body: JSON.stringify(body), signal: reader.controller.signal,
      headers: { "content-type": "application/json", accept: "text/event-stream", authorization: `Bearer ${key}` },
    };
    const response = await reader.wait(fetch(url, init));
    if (response.ok) return response;
    const text = await reader.wait(response.text());
    let payload;
    try { payload = JSON.parse(text); } catch { payload = text.trim().slice(0, 500) || `HTTP ${response.status}`; }
    const error = errorFrom(payload, response.status, response.headers.get("x-request-id"));
    error.body = text;
    const retryable = (response.status === 429 || (response.status >= 500 && ![501, 505].includes(response.status))) && error.code !== "insufficient_quota";
    const wait = retryWait(response.headers, attempt);
    if (!retryable || attempt >= MAX_RETRIES || wait > MAX_RETRY_WAIT) throw error;
    await new Promise((resolve) => setTimeout(resolve, wait * 1000));
  }
}

// -- SSE: events end with a blank line; a piece may end anywhere, inside CRLF or a UTF-8 character ----

class SSEDecoder {
  constructor() { this.text = ""; this.data = []; this.event = ""; this.decoder = new TextDecoder(); }
  feed(bytes) {
    this.text += this.decoder.decode(bytes, { stream: true });
    const events = [];
    let match;
    const line = /\r\n|\n|\r(?!$)/g; // a final CR waits: its LF may be in the next piece
    let start = 0;
    while ((match = line.exec(this.text))) {
      this.line(this.text.slice(start, match.index), events);
      start = match.index + match[0].length;
    }
    this.text = this.text.slice(start);
    return events;
  }
  line(text, events) {
    if (text === "") {
      if (this.data.length) events.push({ event: this.event || "message", data: this.data.join("\n") });
      this.data = []; this.event = "";
      return;
    }
    if (text.startsWith(":")) return;
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? "" : text.slice(colon + 1).replace(/^ /, "");
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
  }
  get cut() { return this.data.length > 0 || this.text.length > 0; } // the body ended inside an event
}

// -- blocks one at a time (dsh_replay's BlockSequencer) ---------------------------------------

class Sequencer {
  constructor(emit) {
    this.emit = emit; this.current = null; this.queue = []; this.live = new Map(); this.next = 0;
    this.toolBlocks = 0; this.toolItems = 0;
  }
  item(key, kind) {
    const found = this.live.get(key);
    if (found && found.kind === kind) return found;
    const position = kind === "tool-call" ? this.toolItems++ : 0; // among the response's calls: derived ids
    const item = { key, kind, parts: [], pending: [], index: null, ended: false, id: "", name: "", position };
    this.live.set(key, item);
    if (this.current && this.current.kind !== "tool-call") this.current.ended = true; // a text run ends when the provider moves on
    this.queue.push(item);
    this.advance();
    return item;
  }
  ready(item) { return item.kind !== "tool-call" || (item.id && item.name); }
  text(text) { if (text) this.piece(this.item("text", "text"), text); }
  toolCall(key, id, name, args) {
    const item = this.item(key, "tool-call");
    if (id && !item.id) item.id = id;
    if (name && !item.name) { item.name = name; if (!item.id) item.id = `call_${item.position}_${name}`; }
    if (args) this.piece(item, args);
    this.advance();
  }
  piece(item, text) {
    item.parts.push(text);
    if (item === this.current) this.emit(this.delta(item, text));
    else item.pending.push(text);
  }
  delta(item, text) {
    if (item.kind === "tool-call") return { type: "tool-call-delta", index: item.index, id: item.id, name: item.name, argumentsDelta: text };
    return { type: item.kind === "text" ? "text-delta" : "reasoning-delta", index: item.index, text };
  }
  advance() {
    for (;;) {
      if (this.current) {
        if (!this.current.ended) return;
        this.close(this.current);
      }
      if (!this.queue.length || !this.ready(this.queue[0])) return;
      const item = (this.current = this.queue.shift());
      item.index = this.next++;
      if (item.kind === "tool-call") this.toolBlocks++;
      this.emit({ type: "block-start", index: item.index, blockType: item.kind });
      for (const text of item.pending) this.emit(this.delta(item, text));
      item.pending = [];
    }
  }
  close(item) {
    this.current = null;
    this.live.delete(item.key);
    let joined = item.parts.join("");
    if (item.kind === "tool-call") {
      if (!joined) { this.emit(this.delta(item, "{}")); joined = "{}"; } // a call with no arguments carries "{}" (P7)
      this.emit({ type: "block-end", index: item.index, block: { type: "tool-call", id: item.id, name: item.name, arguments: joined } });
    } else {
      this.emit({ type: "block-end", index: item.index, block: { type: item.kind, text: joined } });
    }
  }
  finish(usage, raw) {
    for (const item of [this.current, ...this.queue]) if (item) item.ended = true;
    this.advance();
    if (this.current || this.queue.length) throw new AdapterError("MalformedStreamError", "a tool call never received its id or name");
    this.emit({ type: "usage", usage });
    const reason = { kind: this.toolBlocks ? "tool-calls" : "stop" };
    if (raw != null) reason.raw = raw;
    this.emit({ type: "finish", reason });
  }
}

// -- event mapping ---------------------------------------------------------------------------

function usageOf(payload) {
  const raw = payload.usage;
  if (!isObject(raw)) return null;
  const count = (v) => (Number.isInteger(v) && v >= 0 ? v : null);
  const usage = { inputTokens: count(raw.prompt_tokens) ?? 0, outputTokens: count(raw.completion_tokens) ?? 0 };
  const cached = count(raw.prompt_tokens_details?.cached_tokens);
  const reasoning = count(raw.completion_tokens_details?.reasoning_tokens);
  if (cached != null) usage.cachedInputTokens = cached;
  if (reasoning != null) usage.reasoningTokens = reasoning;
  return usage;
}

class Translator {
  constructor(emit) { this.seq = new Sequencer(emit); this.reason = null; this.usage = null; this.finished = false; this.calls = 0; this.byIndex = new Map(); }
  event({ event, data }) {
    if (this.finished) return;
    if (data.trim() === "[DONE]") return this.finish();
    let payload;
    try { payload = JSON.parse(data); } catch { throw new AdapterError("MalformedStreamError", `event is not valid JSON: ${data.slice(0, 80)}`); }
    if (!isObject(payload)) throw new AdapterError("MalformedStreamError", `a chunk is not a JSON object: ${data.slice(0, 80)}`);
    if (event === "error" || payload.error) throw errorFrom(payload);
    for (const choice of Array.isArray(payload.choices) ? payload.choices : []) {
      if (!isObject(choice) || (choice.index ?? 0) !== 0) continue; // choice 0: one generation per stream
      const delta = isObject(choice.delta) ? choice.delta : {};
      if (typeof delta.content === "string") this.seq.text(delta.content);
      if (typeof delta.refusal === "string") this.seq.text(delta.refusal);
      (Array.isArray(delta.tool_calls) ? delta.tool_calls : []).forEach((call, position) => this.toolCall(call, position));
      if (typeof choice.finish_reason === "string" && choice.finish_reason) this.reason = choice.finish_reason;
    }
    this.usage = usageOf(payload) ?? this.usage;
  }
  toolCall(call, position) {
    const fn = isObject(call.function) ? call.function : {};
    const args = typeof fn.arguments === "string" ? fn.arguments : isObject(fn.arguments) ? JSON.stringify(fn.arguments) : "";
    if (!(call.id || fn.name || args)) return;
    const index = Number.isInteger(call.index) ? call.index : position;
    let key = this.byIndex.get(index);
    if (key === undefined || (call.id && key.id && key.id !== call.id)) { // a new id on a taken index is a new call
      key = { n: this.calls++, id: call.id };
      this.byIndex.set(index, key);
    }
    this.seq.toolCall(`tool-${key.n}`, call.id || null, fn.name || null, args);
  }
  finish() {
    this.seq.finish(this.usage ?? { inputTokens: 0, outputTokens: 0 }, this.reason);
    this.finished = true;
  }
  end(cut) {
    if (this.finished) return;
    if (!cut && this.reason !== null && this.usage !== null) return this.finish(); // a server that omits [DONE]
    throw new AdapterError("StreamInterruptedError", "the stream ended before its terminal event `data: [DONE]`");
  }
}

async function run(args, emit) {
  const base = args.baseUrl.replace(/\/+$/, "");
  const url = `${/\/v\d+$/.test(new URL(base).pathname) ? base : `${base}/v1`}/chat/completions`;
  const options = args.options ? JSON.parse(readFileSync(args.options, "utf8")) : DEFAULT_OPTIONS;
  const key = process.env.OPENAI_API_KEY ?? "sk-test-node-example-0123456789";
  const reader = new Reader(args.readTimeout);
  const response = await open(url, requestBody(options), key, reader);
  const body = response.body.getReader();
  const decoder = new SSEDecoder();
  const translator = new Translator(emit);
  try {
    for (;;) {
      const { done, value } = await reader.wait(body.read());
      if (done) break;
      for (const event of decoder.feed(value)) translator.event(event);
    }
    translator.end(decoder.cut);
  } finally {
    reader.controller.abort(); // a consumer that stops early closes the response
  }
}

const args = parseArgs(process.argv.slice(2));
const write = (line) => process.stdout.write(line + "\n");
let text = "";
try {
  await run(args, (chunk) => {
    if (args.jsonl) write(JSON.stringify(chunk));
    else if (chunk.type === "text-delta") { text += chunk.text; process.stdout.write(chunk.text); }
  });
  if (!args.jsonl) process.stdout.write("\n");
} catch (error) {
  process.exitCode = 1;
  if (!(error instanceof AdapterError)) throw error;
  if (args.jsonl) write(JSON.stringify({ type: "raised", error: error.kind, message: error.message }));
  else if (error.body !== undefined) console.error(`HTTP ${error.status}: ${error.body}`);
  else console.error(`${error.kind}: ${error.message}`);
}
