// The page's side of ICA v1: session-authenticated JSON calls, and commands that survive a reload.
// A command is saved locally with its clientMessageId *before* it is posted; after a reload or a
// network failure it is posted again with the same id, which the server answers with the original
// receipt instead of a second submission.
(function () {
  "use strict";

  function csrfToken() {
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }

  async function call(method, url, body) {
    let response;
    try {
      response = await fetch(url, {
        method,
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (error) {
      return { ok: false, status: 0, body: { error: { code: "network", message: String(error), retryable: true } } };
    }
    const text = await response.text();
    let parsed = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch (error) {
      parsed = { error: { code: "bad_response", message: text.slice(0, 200), retryable: response.status >= 500 } };
    }
    return { ok: response.ok, status: response.status, body: parsed };
  }

  // Unanswered commands belong to the account that typed them: the store is keyed by the logged-in
  // user and emptied at logout, so a text left pending by one person is never posted as another's on a
  // shared browser. A store from before this scoping has no known owner and is dropped.
  const PENDING_PREFIX = "impo.pendingCommands";
  const userId = document.body.dataset.userId || "";
  const PENDING_KEY = `${PENDING_PREFIX}.${userId}`;
  localStorage.removeItem(PENDING_PREFIX);

  function pendingCommands() {
    if (!userId) return [];
    try {
      return JSON.parse(localStorage.getItem(PENDING_KEY) || "[]");
    } catch (error) {
      return [];
    }
  }

  function savePending(commands) {
    if (!userId) return;
    if (commands.length) localStorage.setItem(PENDING_KEY, JSON.stringify(commands));
    else localStorage.removeItem(PENDING_KEY);
  }

  function forgetPending() {
    for (const key of Object.keys(localStorage)) if (key.startsWith(`${PENDING_PREFIX}.`)) localStorage.removeItem(key);
  }

  const logout = document.getElementById("logout");
  if (logout) logout.addEventListener("submit", forgetPending);

  function isRetryable(result) {
    return result.status === 0 || result.status >= 500 || (result.body && result.body.error && result.body.error.retryable);
  }

  async function post(command) {
    const result = await call("POST", command.url, command.body);
    if (!isRetryable(result)) forget(command);
    return result;
  }

  // A new command for `url` with `fields` ({text, deviceId?}), remembered until answered for good.
  function command(url, fields) {
    const created = { url, body: { clientMessageId: newId(), ...fields } };
    savePending([...pendingCommands(), created]);
    return created;
  }

  function forget(command) {
    savePending(pendingCommands().filter((c) => c.body.clientMessageId !== command.body.clientMessageId));
  }

  async function sendOnce(url, fields) {
    return post(command(url, fields));
  }

  // Re-posts commands a previous page (or a failed request) left unanswered, with their own ids.
  async function resendPending(url) {
    const results = [];
    for (const command of pendingCommands().filter((c) => c.url === url)) results.push(await post(command));
    return results;
  }

  function isPending(clientMessageId) {
    return pendingCommands().some((c) => c.body.clientMessageId === clientMessageId);
  }

  window.ImpoApi = {
    call,
    command,
    forget,
    post,
    sendOnce,
    resendPending,
    pendingCommands,
    isPending,
    isRetryable,
    newId,
  };
})();
