// A tiny OpenAI Chat Completions streaming client in plain Node (18+, no npm packages),
// run against `dsh-replay serve`: it posts the request recorded in
// cassettes/openai/text.yaml and reads the SSE stream the server replays.
//
//   node examples/node/stream.mjs http://127.0.0.1:PORT           # the text, as it streams
//   node examples/node/stream.mjs http://127.0.0.1:PORT --jsonl   # StreamChunk JSONL (docs/protocol.md)
//
// The JSONL is what a TypeScript adapter would emit; `dsh-replay validate` and
// `dsh-replay diff` check it against cassettes/openai/text.chunks.jsonl.

const [baseUrl, mode] = process.argv.slice(2);
if (!baseUrl) {
  console.error("usage: node stream.mjs BASE_URL [--jsonl]");
  process.exit(2);
}

// the request of cassettes/openai/text.yaml (matched as JSON data: key order is free)
const request = {
  model: "gpt-4.1-mini",
  messages: [
    { role: "system", content: "You are a concise assistant. Answer in one or two sentences." },
    { role: "user", content: "Say hello." },
  ],
  stream: true,
  stream_options: { include_usage: true },
};

const response = await fetch(`${baseUrl.replace(/\/$/, "")}/v1/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: "Bearer sk-test-node-example-0123456789" },
  body: JSON.stringify(request),
});
if (!response.ok) {
  console.error(`HTTP ${response.status}: ${await response.text()}`);
  process.exit(1);
}

const jsonl = mode === "--jsonl";
const emit = (chunk) => process.stdout.write(JSON.stringify(chunk) + "\n");
let text = "";
let open = false;
let finish = null;
let usage = null;

function onEvent(data) {
  if (data === "[DONE]") return;
  const event = JSON.parse(data);
  for (const choice of event.choices ?? []) {
    const piece = choice.delta?.content;
    if (piece) {
      if (jsonl && !open) emit({ type: "block-start", index: 0, blockType: "text" });
      open = true;
      text += piece;
      if (jsonl) emit({ type: "text-delta", index: 0, text: piece });
      else process.stdout.write(piece);
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  if (event.usage) usage = event.usage;
}

// SSE: events end with a blank line; a fragment may end anywhere, even inside a UTF-8 character
const decoder = new TextDecoder();
let buffer = "";
for await (const bytes of response.body) {
  buffer += decoder.decode(bytes, { stream: true });
  let end;
  while ((end = buffer.indexOf("\n\n")) >= 0) {
    const block = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart());
    if (data.length) onEvent(data.join("\n"));
  }
}

if (!jsonl) {
  process.stdout.write("\n");
} else {
  if (open) emit({ type: "block-end", index: 0, block: { type: "text", text } });
  emit({
    type: "usage",
    usage: {
      inputTokens: usage?.prompt_tokens ?? 0,
      outputTokens: usage?.completion_tokens ?? 0,
      cachedInputTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
      reasoningTokens: usage?.completion_tokens_details?.reasoning_tokens ?? 0,
    },
  });
  emit({ type: "finish", reason: { kind: finish === "tool_calls" ? "tool-calls" : "stop", raw: finish ?? "stop" } });
}
