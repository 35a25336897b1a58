// Reads one Impo submission stream with the AI SDK's own parser and prints the final UIMessage as
// JSON: the same path a `useChat` client takes (SSE -> uiMessageChunkSchema -> readUIMessageStream).
// Usage: node read_ui_message_stream.mjs <url> <bearer token>
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const [url, token] = process.argv.slice(2);
const response = await fetch(url, { headers: { Authorization: `Bearer ${token}` } });
if (!response.ok) {
  console.error(`HTTP ${response.status}: ${await response.text()}`);
  process.exit(2);
}
const chunks = parseJsonEventStream({ stream: response.body, schema: uiMessageChunkSchema }).pipeThrough(
  new TransformStream({
    transform(result, controller) {
      if (!result.success) throw result.error;
      controller.enqueue(result.value);
    },
  }),
);
let message;
for await (const snapshot of readUIMessageStream({
  stream: chunks,
  onError: (error) => {
    throw error;
  },
})) {
  message = snapshot;
}
console.log(JSON.stringify({ header: response.headers.get("x-vercel-ai-ui-message-stream"), message }));
