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

  const PENDING_KEY = "impo.pendingCommands";

  function pendingCommands() {
    try {
      return JSON.parse(localStorage.getItem(PENDING_KEY) || "[]");
    } catch (error) {
      return [];
    }
  }

  function savePending(commands) {
    localStorage.setItem(PENDING_KEY, JSON.stringify(commands));
  }

  function isRetryable(result) {
    return result.status === 0 || result.status >= 500 || (result.body && result.body.error && result.body.error.retryable);
  }

  async function post(command) {
    const result = await call("POST", command.url, command.body);
    if (!isRetryable(result)) {
      savePending(pendingCommands().filter((c) => c.body.clientMessageId !== command.body.clientMessageId));
    }
    return result;
  }

  // Posts `fields` ({text, deviceId?}) to `url` as a new command, remembered until answered for good.
  async function sendOnce(url, fields) {
    const command = { url, body: { clientMessageId: newId(), ...fields } };
    savePending([...pendingCommands(), command]);
    return post(command);
  }

  // Re-posts commands a previous page (or a failed request) left unanswered, with their own ids.
  async function resendPending(url) {
    const results = [];
    for (const command of pendingCommands().filter((c) => c.url === url)) results.push(await post(command));
    return results;
  }

  function showError(element, body) {
    const error = (body && body.error) || { message: "Something went wrong." };
    element.textContent = error.message;
    element.hidden = false;
  }

  window.ImpoApi = { call, sendOnce, resendPending, pendingCommands, showError, newId };
})();
