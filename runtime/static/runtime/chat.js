// Main Chat and task views. History comes from REST; live updates from the conversation websocket,
// resumed with `after=<last seq>`. A socket that closes while a run is active is not taken as
// success: the page re-reads history (the database's truth) and resubscribes.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const list = document.getElementById("messages");
  const indicator = document.getElementById("connection");
  const errorBox = document.getElementById("chat-error");
  const composer = document.getElementById("composer");
  const conversationId = root.dataset.conversationId;
  const historyUrl = root.dataset.historyUrl;
  const sendUrl = root.dataset.sendUrl;
  const isDevice = root.dataset.device === "on"; // Main Chat only: Tasks never get device tools
  const TERMINAL = new Set(["completed", "failed", "cancelled"]);

  const state = {
    messages: new Map(), // id -> {id, role, sequence, text, status}
    active: new Map(), // submissionId -> {messageId, status}
    tools: new Map(), // toolCallId -> {messageId, toolName, state, detail}
    errors: new Map(), // assistant messageId -> error text
    lastSeq: 0,
  };
  let socket = null;
  let retryDelay = 500;

  function setConnection(label, value) {
    indicator.dataset.state = label;
    indicator.textContent = value;
  }

  async function loadHistory() {
    const messages = new Map();
    let after = 0;
    let page;
    do {
      const result = await ImpoApi.call("GET", `${historyUrl}?afterSequence=${after}&limit=100`);
      if (!result.ok) throw new Error(result.body && result.body.error ? result.body.error.message : "history failed");
      page = result.body;
      page.messages.forEach((message) => messages.set(message.id, message));
      after = page.nextAfterSequence;
    } while (page.hasMore);
    state.messages = messages;
    state.tools = new Map();
    for (const message of messages.values()) {
      for (const tool of message.tools || []) {
        state.tools.set(tool.toolCallId, { messageId: message.id, toolName: tool.toolName, state: tool.state, detail: tool.errorCode || "" });
      }
    }
    state.active = new Map(page.activeSubmissions.map((s) => [s.submissionId, { messageId: s.messageId, status: s.status }]));
    state.lastSeq = page.lastEventSeq;
    render();
  }

  function statusOf(messageId) {
    for (const submission of state.active.values()) if (submission.messageId === messageId) return submission.status;
    return null;
  }

  function submissionOf(messageId) {
    for (const [id, submission] of state.active) if (submission.messageId === messageId) return id;
    return null;
  }

  function render() {
    const ordered = [...state.messages.values()].sort((a, b) => a.sequence - b.sequence);
    list.replaceChildren(
      ...ordered.map((message) => {
        const item = document.createElement("li");
        item.className = `message role-${message.role}`;
        item.dataset.messageId = message.id;
        const text = document.createElement("div");
        text.className = "text";
        text.textContent = message.text;
        item.append(text);
        for (const [callId, tool] of state.tools) {
          if (tool.messageId !== message.id) continue;
          const row = document.createElement("div");
          row.className = `tool tool-${tool.state}`;
          row.dataset.toolCallId = callId;
          row.textContent = `${tool.toolName}: ${tool.state}${tool.detail ? ` — ${tool.detail}` : ""}`;
          item.append(row);
        }
        if (message.role === "assistant") {
          const status = document.createElement("span");
          const live = statusOf(message.id);
          status.className = `status status-${live || message.status}`;
          status.textContent = live || message.status;
          item.append(status);
          if (state.errors.has(message.id)) {
            const error = document.createElement("div");
            error.className = "error";
            error.textContent = state.errors.get(message.id);
            item.append(error);
          }
          const submissionId = submissionOf(message.id);
          if (submissionId) {
            const cancel = document.createElement("button");
            cancel.className = "cancel";
            cancel.type = "button";
            cancel.textContent = "Cancel";
            cancel.addEventListener("click", () => ImpoApi.call("POST", `/api/v1/submissions/${submissionId}/cancel`, {}));
            item.append(cancel);
          }
        }
        return item;
      }),
    );
    list.scrollTop = list.scrollHeight;
  }

  const handlers = {
    "submission.accepted"(event) {
      const { userMessage, assistantMessage, submissionId } = event.payload;
      state.messages.set(userMessage.id, { ...userMessage, role: "user", status: "completed" });
      state.messages.set(assistantMessage.id, { ...assistantMessage, role: "assistant", text: "", status: "pending" });
      state.active.set(submissionId, { messageId: assistantMessage.id, status: "queued" });
    },
    "run.started"(event) {
      setActive(event.submissionId, "running");
    },
    "run.pending_reconciliation"(event) {
      setActive(event.submissionId, "pending_reconciliation");
    },
    "text.delta"(event) {
      const message = state.messages.get(event.payload.messageId);
      if (message) {
        message.text += event.payload.delta;
        message.status = "streaming";
      }
    },
    "tool.requested"(event) {
      trackTool(event, "requested");
      // Only the listing + claim authorise running it; the event is a wake-up, never an order.
      if (isDevice && event.payload.device && event.payload.device.deviceId === ImpoDevice.id) ImpoDevice.check();
    },
    "tool.accepted"(event) {
      trackTool(event, "accepted");
      if (event.payload.status) setActive(event.submissionId, event.payload.status);
    },
    "tool.completed"(event) {
      trackTool(event, event.payload.error ? "failed" : "completed", event.payload.error && event.payload.error.message);
    },
    "tool.uncertain"(event) {
      trackTool(event, "uncertain", event.payload.code);
    },
    "run.completed": finish,
    "run.failed": finish,
    "run.cancelled": finish,
  };

  function setActive(submissionId, status) {
    const submission = state.active.get(submissionId);
    if (submission) submission.status = status;
  }

  function trackTool(event, toolState, detail) {
    const submission = state.active.get(event.submissionId);
    const previous = state.tools.get(event.payload.toolCallId) || {};
    state.tools.set(event.payload.toolCallId, {
      messageId: previous.messageId || (submission && submission.messageId) || event.payload.messageId,
      toolName: event.payload.toolName || previous.toolName || "tool",
      state: toolState,
      detail: detail || "",
    });
  }

  function finish(event) {
    const message = state.messages.get(event.payload.messageId);
    if (message) message.status = event.payload.status;
    if (event.payload.error) state.errors.set(event.payload.messageId, event.payload.error.message);
    state.active.delete(event.submissionId);
  }

  function apply(event) {
    if (event.seq <= state.lastSeq) return; // already applied (a replay overlapping a live push)
    if (event.seq !== state.lastSeq + 1) {
      // A hole: never guess; resubscribe from the last applied event and let the server replay it.
      socket.close();
      return;
    }
    state.lastSeq = event.seq;
    const handler = handlers[event.type];
    if (handler) handler(event);
    render();
  }

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/v1/conversations/${conversationId}/?after=${state.lastSeq}`);
    socket.addEventListener("open", () => {
      retryDelay = 500;
      setConnection("live", "live");
    });
    socket.addEventListener("message", (message) => apply(JSON.parse(message.data)));
    socket.addEventListener("close", () => {
      setConnection("reconnecting", "reconnecting…");
      setTimeout(reconnect, retryDelay);
      retryDelay = Math.min(retryDelay * 2, 5000);
    });
  }

  async function reconnect() {
    try {
      // The close may have hidden the end of a run: the history is the truth, not the last frame seen.
      if (state.active.size) await loadHistory();
      connect();
      if (isDevice) ImpoDevice.check();
    } catch (error) {
      setTimeout(reconnect, retryDelay);
    }
  }

  composer.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = composer.text.value;
    if (!text.trim()) return;
    errorBox.hidden = true;
    composer.text.value = "";
    const result = await ImpoApi.sendOnce(sendUrl, isDevice ? { text, deviceId: ImpoDevice.id } : { text });
    if (!result.ok) {
      ImpoApi.showError(errorBox, result.body);
      if (result.status && result.status < 500) composer.text.value = text;
    }
  });

  (async function start() {
    if (isDevice) await ImpoDevice.register();
    await loadHistory();
    connect();
    await ImpoApi.resendPending(sendUrl);
    if (isDevice) await ImpoDevice.check();
  })().catch((error) => ImpoApi.showError(errorBox, { error: { message: String(error) } }));

  window.ImpoChat = { state };
})();
