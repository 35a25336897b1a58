// The chat page's common ground, for the scripts that draw and drive it (chat_tools.js, chat_messages.js,
// chat_events.js and chat.js, loaded after this one in that order): its elements, what it knows of the
// conversation (`state`, the one copy every part reads and changes) and the small builders they share.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const state = {
    messages: new Map(), // id -> {id, role, sequence, text, status, error}
    active: new Map(), // submissionId -> {messageId, status}
    // toolCallId -> {messageId, toolName, state, input, output, errorCode, errorMessage, device, approval}
    tools: new Map(),
    progress: new Map(), // messageId -> its transient progress (ImpoProgress), while it runs
    lastSeq: 0,
  };
  const textarea = document.getElementById("message-text");

  function liveStatusOf(messageId) {
    for (const submission of state.active.values()) if (submission.messageId === messageId) return submission.status;
    return null;
  }

  function lastUserMessageId() {
    let last = null;
    for (const message of state.messages.values()) if (message.role === "user" && (!last || message.sequence > last.sequence)) last = message;
    return last && last.id;
  }

  function lastMessage() {
    let last = null;
    for (const message of state.messages.values()) if (!last || message.sequence > last.sequence) last = message;
    return last;
  }

  // Regenerated replies (docs/api.md "Regenerate"): every attempt at a user message is a message of its own, and one
  // is shown at a time — the latest, unless the reader pages back with "‹ 1 / 2 ›".
  const shownAttempt = new Map(); // user message id -> the attempt the reader chose

  function attemptsOf(message) {
    return message.attemptIds && message.attemptIds.length ? message.attemptIds : [message.id];
  }

  function button(label, className, onClick, accessibleName) {
    const element = document.createElement("button");
    element.type = "button";
    element.className = className;
    element.textContent = label;
    if (accessibleName) element.setAttribute("aria-label", accessibleName);
    element.addEventListener("click", onClick);
    return element;
  }

  function paragraph(className, text) {
    const element = document.createElement("p");
    element.className = className;
    element.textContent = text;
    return element;
  }

  // The composer grows with its text, up to a third of the screen, then scrolls.
  function growComposer() {
    textarea.style.height = "auto";
    textarea.style.height = `${Math.min(textarea.scrollHeight + 2, window.innerHeight / 3)}px`;
  }

  window.ImpoChatPage = {
    list: document.getElementById("messages"),
    emptyState: document.getElementById("empty-state"),
    indicator: document.getElementById("connection"),
    errorBox: document.getElementById("chat-error"),
    composer: document.getElementById("composer"),
    textarea,
    sendButton: document.getElementById("send"),
    sendChoice: document.getElementById("send-choice"),
    composerNote: document.getElementById("composer-note"),
    announcer: document.getElementById("announcer"),
    jumpButton: document.getElementById("jump-to-latest"),
    conversationId: root.dataset.conversationId,
    historyUrl: root.dataset.historyUrl,
    sendUrl: root.dataset.sendUrl,
    isDevice: root.dataset.device === "on", // Main Chat only: Tasks never get device tools
    state,
    nodes: new Map(), // message id -> {item, body, tools, footer, progress, drawnText}
    announced: new Set(), // replies read out once by the live region
    shownAttempt,
    liveStatusOf,
    lastUserMessageId,
    lastMessage,
    attemptsOf,
    button,
    paragraph,
    growComposer,
  };
})();
