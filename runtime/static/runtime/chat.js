// Main Chat and task views. History comes from REST; live updates from the conversation websocket,
// resumed with `after=<last seq>`. A socket that closes while a run is active is not taken as
// success: the page re-reads history (the database's truth) and resubscribes. Here: the socket, the
// composer and the start; the page's parts are drawn by chat_messages.js and chat_tools.js, the events
// applied by chat_events.js, over the state in chat_page.js.
(function () {
  "use strict";

  const shared = window.ImpoChatPage;
  const { list, indicator, errorBox, composer, textarea, sendButton, sendChoice, composerNote, jumpButton } = shared;
  const { conversationId, sendUrl, isDevice, state, paragraph, growComposer } = shared;
  const { loadHistory, withScrollKept, drawJump, jumpToLatest, renderMessage, drawChrome } = window.ImpoChatMessages;
  let socket = null;
  // Reconnecting backs off: doubling up to 30 s, each wait drawn between half and all of it so pages that lost
  // their sockets together do not return together. A socket the server refused after accepting it (4000-4999,
  // e.g. 4429: too many open sockets) says why and waits at least 5 s; the back-off only starts over once a
  // socket has stayed open for 10 s (a refused one opens and closes at once).
  const RETRY_FIRST_MS = 500;
  const RETRY_MAX_MS = 30000;
  const REFUSED_MIN_MS = 5000;
  const STEADY_MS = 10000;
  let retryDelay = RETRY_FIRST_MS;
  let openedAt = 0;
  let failedCommand = null; // the command whose post failed for lack of a connection; shown as a pending bubble

  function setConnection(label, value) {
    indicator.dataset.state = label;
    indicator.textContent = value;
  }

  // The server closes with this code (after a `snapshot.reload` frame) when events after our last one are no
  // longer kept (docs/data-lifecycle.md): the history is reloaded and the socket resumes from its lastEventSeq.
  const EVENTS_COMPACTED_CLOSE_CODE = 4410;
  // And with this one (after a `conversation.deleted` frame) when the chat was deleted, here or elsewhere: the
  // page says so and stops (a socket to it would be refused).
  const CONVERSATION_DELETED_CLOSE_CODE = 4404;

  function apply(event) {
    if (event.type === "snapshot.reload" || event.type === "conversation.deleted") return; // the close follows
    if (event.seq <= state.lastSeq) return; // already applied (a replay overlapping a live push)
    if (event.seq !== state.lastSeq + 1) {
      // A hole: never guess; resubscribe from the last applied event and let the server replay it.
      socket.close();
      return;
    }
    state.lastSeq = event.seq;
    for (const id of ImpoChatEvents.apply(event)) if (id) renderMessage(id);
  }

  // The browser says when it has no network: the header says so at once, not after a socket times out.
  window.addEventListener("offline", () => setConnection("offline", "offline"));

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    socket = new WebSocket(`${scheme}://${location.host}/ws/v1/conversations/${conversationId}/?after=${state.lastSeq}`);
    socket.addEventListener("open", () => {
      window.dispatchEvent(new CustomEvent("impo:socket-open", { detail: socket })); // push.js reports visibility
      openedAt = Date.now();
      setConnection("live", "live");
      resendFailed();
    });
    socket.addEventListener("message", (message) => apply(JSON.parse(message.data)));
    socket.addEventListener("close", (event) => {
      if (event.code === EVENTS_COMPACTED_CLOSE_CODE) {
        reload();
        return;
      }
      if (event.code === CONVERSATION_DELETED_CLOSE_CODE) {
        setConnection("deleted", "deleted");
        errorBox.textContent = "This chat was deleted. Reload the page to start again.";
        errorBox.hidden = false;
        textarea.disabled = true;
        sendButton.disabled = true;
        return;
      }
      const refused = event.code >= 4000 && event.code < 5000;
      const wait = nextRetryDelay(refused);
      if (refused) {
        const why = event.reason || "The server refused the connection.";
        setConnection("refused", `${why} Retrying in ${Math.ceil(wait / 1000)} s.`);
      } else if (!navigator.onLine) {
        setConnection("offline", "offline");
      } else {
        setConnection("reconnecting", "reconnecting…");
      }
      setTimeout(reconnect, wait);
    });
  }

  function nextRetryDelay(refused) {
    if (openedAt && Date.now() - openedAt >= STEADY_MS) retryDelay = RETRY_FIRST_MS;
    openedAt = 0;
    const base = refused ? Math.max(retryDelay, REFUSED_MIN_MS) : retryDelay;
    retryDelay = Math.min(base * 2, RETRY_MAX_MS);
    return base / 2 + Math.random() * (base / 2);
  }

  async function reload() {
    try {
      await loadHistory();
      connect();
    } catch (error) {
      setTimeout(reconnect, nextRetryDelay(false));
    }
  }

  async function reconnect() {
    try {
      // The close may have hidden the end of a run: the history is the truth, not the last frame seen.
      if (state.active.size) await loadHistory();
      connect();
      if (isDevice) ImpoDevice.check();
    } catch (error) {
      setTimeout(reconnect, nextRetryDelay(false));
    }
  }

  function noteComposer(text) {
    composerNote.textContent = text;
    composerNote.hidden = !text;
  }

  // A post that failed for lack of a connection keeps its text in the composer and its command (and
  // clientMessageId) in the pending store; it is posted again when the socket comes back.
  async function deliver(command) {
    drawPending();
    const result = await ImpoApi.post(command);
    if (result.ok) {
      if (failedCommand === command) failedCommand = null;
      noteComposer("");
    } else if (ImpoApi.isRetryable(result)) {
      failedCommand = command;
      noteComposer("Not sent yet: it will be sent when the connection returns.");
    } else {
      failedCommand = null;
      if (!textarea.value) textarea.value = command.body.text;
      noteComposer("");
      ImpoUi.showError(errorBox, result.body);
    }
    drawPending();
    drawChrome();
    return result;
  }

  // Messages posted but not yet answered (the pending store, which outlives a reload) are bubbles at the end of
  // the list, marked as not sent yet; each goes once the server has it (its own bubble comes from the events).
  function drawPending() {
    withScrollKept(() => {
      const waiting = ImpoApi.pendingCommands().filter((command) => command.url === sendUrl);
      for (const item of [...list.querySelectorAll(".is-pending")]) item.remove();
      for (const command of waiting) {
        const item = document.createElement("li");
        item.className = "message role-user is-pending";
        item.dataset.clientMessageId = command.body.clientMessageId;
        const body = document.createElement("div");
        body.className = "text";
        body.textContent = command.body.text;
        const footer = document.createElement("div");
        footer.className = "footer";
        const failed = failedCommand && failedCommand.body.clientMessageId === command.body.clientMessageId;
        footer.append(paragraph("pending-note", failed || !navigator.onLine ? "Not sent yet" : "Sending…"));
        const files = (command.body.attachmentIds || []).length;
        if (files) footer.append(paragraph("pending-note", files === 1 ? "with 1 file" : `with ${files} files`));
        item.append(body, footer);
        list.append(item);
      }
      drawChrome();
    });
  }

  async function resendFailed() {
    if (failedCommand && ImpoApi.isPending(failedCommand.body.clientMessageId)) await deliver(failedCommand);
  }

  // Sending while a reply runs asks what to do with that reply: wait for it (`queue`) or stop it (`interrupt`).
  // The answer goes with the message as its `messagePolicy`; the conversation's own policy is not changed.
  function offerSendChoice() {
    sendChoice.hidden = false;
    sendChoice.querySelector("button").focus();
  }

  function closeSendChoice() {
    sendChoice.hidden = true;
    textarea.focus();
  }

  async function send(policy) {
    const text = textarea.value;
    if (!text.trim() && !ImpoAttachments.count()) return;
    if (!ImpoAttachments.ready()) return; // Send is off until every file is uploaded
    if (!policy && state.active.size > 0) {
      offerSendChoice();
      return;
    }
    sendChoice.hidden = true;
    errorBox.hidden = true;
    textarea.focus();
    const fields = isDevice ? { text, deviceId: ImpoDevice.id } : { text };
    if (policy) fields.messagePolicy = policy;
    const attachmentIds = ImpoAttachments.take();
    if (attachmentIds.length) fields.attachmentIds = attachmentIds;
    const command = ImpoApi.command(sendUrl, fields);
    textarea.value = "";
    growComposer();
    drawChrome();
    await deliver(command);
  }

  async function stop() {
    await Promise.all([...state.active.keys()].map((id) => ImpoApi.call("POST", `/api/v1/submissions/${id}/cancel`, {})));
  }

  composer.addEventListener("submit", (event) => {
    event.preventDefault();
    if (sendButton.dataset.mode === "stop") stop();
    else send();
  });
  textarea.addEventListener("keydown", (event) => {
    if (!ImpoUi.enterSends(event)) return;
    event.preventDefault();
    send();
  });
  sendChoice.addEventListener("click", (event) => {
    const choice = event.target.closest("button[data-policy]");
    if (choice) send(choice.dataset.policy);
    else if (event.target.closest("#send-choice-cancel")) closeSendChoice();
  });
  sendChoice.addEventListener("keydown", (event) => {
    if (event.key === "Escape") closeSendChoice();
  });
  textarea.addEventListener("input", () => {
    growComposer();
    drawChrome();
  });
  list.addEventListener("scroll", drawJump);
  jumpButton.addEventListener("click", jumpToLatest);
  window.addEventListener("online", () => {
    if (indicator.dataset.state !== "offline") return resendFailed();
    // The socket may have outlived the outage (then it is live again), or be reconnecting on its own.
    if (socket && socket.readyState === WebSocket.OPEN) setConnection("live", "live");
    else setConnection("reconnecting", "reconnecting…");
    resendFailed();
  });
  window.addEventListener("offline", drawPending);

  // The long placeholder tells keyboard users about Enter; on a phone it would be clipped, and Return breaks lines.
  if (ImpoUi.isTouchOnly()) textarea.placeholder = "Message";

  (async function start() {
    if (isDevice) await ImpoDevice.register();
    await loadHistory();
    drawPending();
    list.scrollTop = list.scrollHeight;
    connect();
    for (const result of await ImpoApi.resendPending(sendUrl)) {
      if (!result.ok && !ImpoApi.isRetryable(result)) ImpoUi.showError(errorBox, result.body);
    }
    drawPending();
    if (isDevice) await ImpoDevice.check();
  })().catch((error) => ImpoUi.showError(errorBox, { error: { message: String(error) } }));

  window.ImpoChat = { state };
})();
