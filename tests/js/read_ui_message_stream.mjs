// Reads one Impo submission stream with the AI SDK's own parser and prints the final UIMessage as
// JSON: the same path a `useChat` client takes (SSE -> uiMessageChunkSchema -> readUIMessageStream).
// It also reports how the stream ended: `finished` once a `finish` chunk arrived, the `error` chunks'
// texts, `aborted` for an `abort`, and the transient steps it was told about.
// Usage: node read_ui_message_stream.mjs <url> <bearer token>
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const [url, token] = process.argv.slice(2);
const response = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
if (!response.ok) {
  console.error(`HTTP ${response.status}: ${await response.text()}`);
  process.exit(2);
}
let finished = false;
let aborted = false;
const steps = [];
const chunks = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }).pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (!result.success) throw result.error;
      const chunk = result.value;
      if (chunk.type === "finish") finished = true;
      if (chunk.type === "abort") aborted = true;
      if (chunk.type === "data-instant-step") steps.push({ id: chunk.id, transient: chunk.transient, ...chunk.data });
      controller.enqueue(chunk);
    },
  }),
);
const errors = [];
let message;
for await (const snapshot of readUIMessageStream({
  stream: chunks,
  onError: (error) => {
    errors.push(error.message);
  },
})) {
  message = snapshot;
}
console.log(
  JSON.stringify({ header: response.headers.get("x-vercel-ai-ui-message-stream"), message, finished, aborted, errors, steps }),
);
