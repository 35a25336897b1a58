// The chat's messages, drawn keyed: each message owns one list item, and an event redraws only the message it
// touches, so a streaming reply neither resets the reader's scroll position nor their selection elsewhere on the
// page. Also what hangs under a reply (time, status, versions, the Copy / thumbs / Regenerate icons, Try again; under a user message it is
// chat_edit.js's), the empty state and Send/Stop, and the history that (re)fills the page.
(function () {
  "use strict";

  const shared = window.ImpoChatPage;
  const { list, emptyState, errorBox, textarea, sendButton, announcer, jumpButton, historyUrl } = shared;
  const { state, nodes, announced, shownAttempt, isDevice } = shared;
  const { liveStatusOf, lastMessage, attemptsOf, button, paragraph } = shared;
  const NEAR_BOTTOM_PX = 48;

  // Plain words for the states a person sees; the codes stay in data attributes and classes.
  const RUN_WORDS = {
    pending: "Queued",
    queued: "Queued",
    running: "Replying…",
    streaming: "Replying…",
    waiting_device: "Waiting for your device",
    waiting_approval: "Waiting for your approval",
    reconnecting: "Reconnecting to the agent…",
    pending_reconciliation: "Reconnecting to the agent…",
    needs_staff: "Couldn't confirm with the provider — a person will check",
    completed: "Completed",
    failed: "Failed",
    cancelled: "Stopped",
  };

  async function loadHistory() {
    const messages = new Map();
    const tools = new Map();
    let after = 0;
    let page;
    do {
      const result = await ImpoApi.call("GET", `${historyUrl}?afterSequence=${after}&limit=100`);
      if (!result.ok) throw new Error(result.body && result.body.error ? result.body.error.message : "history failed");
      page = result.body;
      for (const message of page.messages) {
        messages.set(message.id, { ...message });
        for (const tool of message.tools || []) {
          tools.set(tool.toolCallId, { ...tool, messageId: message.id });
        }
      }
      after = page.nextAfterSequence;
    } while (page.hasMore);
    state.messages = messages;
    state.tools = tools;
    state.active = new Map(page.activeSubmissions.map((s) => [s.submissionId, activeFrom(s)]));
    state.lastSeq = page.lastEventSeq;
    for (const message of messages.values()) if (message.role === "assistant" && message.status !== "pending") announced.add(message.id);
    renderAll();
  }

  // A run waiting out a provider outage is said as reconnecting, as `run.reconnecting` says it live.
  function activeFrom(submission) {
    const reconnecting = submission.reconnecting && ["queued", "running"].includes(submission.status);
    return { messageId: submission.messageId, status: reconnecting ? "reconnecting" : submission.status, needsStaff: submission.needsStaff };
  }

  function nearBottom() {
    return list.scrollHeight - list.scrollTop - list.clientHeight < NEAR_BOTTOM_PX;
  }

  // Redraws what changed, keeping the reader where they are unless they were following the end.
  function withScrollKept(draw) {
    const follow = nearBottom();
    draw();
    if (follow) list.scrollTop = list.scrollHeight;
    drawJump();
  }

  // "Jump to latest" while the reader is scrolled up, away from the end.
  function drawJump() {
    jumpButton.hidden = nearBottom();
  }

  function jumpToLatest() {
    list.scrollTop = list.scrollHeight;
    drawJump();
    textarea.focus();
  }

  function renderAll() {
    withScrollKept(() => {
      for (const id of [...nodes.keys()]) {
        if (!state.messages.has(id)) {
          nodes.get(id).item.remove();
          nodes.delete(id);
        }
      }
      for (const id of state.messages.keys()) drawMessage(id);
      drawChrome();
    });
  }

  function renderMessage(id) {
    withScrollKept(() => {
      drawMessage(id);
      drawChrome();
    });
  }

  function nodeFor(message) {
    let node = nodes.get(message.id);
    if (node) return node;
    const item = document.createElement("li");
    item.className = `message role-${message.role}`;
    item.dataset.messageId = message.id;
    const label = document.createElement("span");
    label.className = "visually-hidden";
    label.textContent = message.role === "user" ? "You said:" : "Assistant:";
    const tools = document.createElement("div");
    tools.className = "tools";
    const body = document.createElement("div");
    body.className = message.role === "assistant" ? "text markdown" : "text";
    const footer = document.createElement("div");
    footer.className = "footer";
    const progress = ImpoProgress.element();
    const reasoning = ImpoReasoning.element();
    item.append(label, progress, reasoning, tools, body, footer);
    node = { item, body, tools, footer, progress, reasoning, drawnText: null };
    nodes.set(message.id, node);
    // In sequence order: before the first message drawn with a later sequence.
    const later = [...list.children].find((child) => {
      const other = state.messages.get(child.dataset.messageId);
      return other && other.sequence > message.sequence;
    });
    list.insertBefore(item, later || null);
    return node;
  }

  function drawMessage(id) {
    const message = state.messages.get(id);
    if (!message) return;
    const node = nodeFor(message);
    if (node.drawnText !== message.text) {
      if (message.role === "assistant") node.body.replaceChildren(ImpoMarkdown.render(message.text));
      else node.body.textContent = message.text;
      node.drawnText = message.text;
    }
    if (message.role !== "assistant") {
      ImpoChatFiles.draw(node, message);
      return ImpoChatEdit.drawUser(message, node);
    }
    node.item.hidden = !isShown(message);
    ImpoChatTools.draw(id, node);
    drawProgress(message, node);
    ImpoReasoning.draw(node.reasoning, message, state.progress.get(id));
    drawFooter(message, node);
    announceIfFinished(message);
  }

  // The live region reads each finished reply once (never its chunks while it streams).
  function announceIfFinished(message) {
    if (liveStatusOf(message.id) || announced.has(message.id)) return;
    if (!["completed", "failed", "cancelled"].includes(message.status)) return;
    announced.add(message.id);
    const words = message.status === "completed" ? message.text.slice(0, 500) : ImpoUi.runSentenceFor(message.error);
    announcer.textContent = `Assistant replied: ${words}`;
  }

  function isLatestAttempt(message) {
    const ids = attemptsOf(message);
    return ids[ids.length - 1] === message.id;
  }

  function isShown(message) {
    if (!ImpoChatEdit.isOnShownBranch(message)) return false;
    const chosen = message.replyTo && shownAttempt.get(message.replyTo);
    return chosen ? chosen === message.id : isLatestAttempt(message);
  }

  function attemptPager(message) {
    const ids = attemptsOf(message);
    const index = ids.indexOf(message.id);
    const pager = document.createElement("span");
    pager.className = "attempts";
    pager.setAttribute("role", "group");
    pager.setAttribute("aria-label", "Versions of this reply");
    const previous = button("‹", "link attempt-previous", () => showAttempt(message, index - 1), "Previous version");
    previous.disabled = index === 0;
    const position = document.createElement("span");
    position.className = "attempt-position";
    position.textContent = `${index + 1} / ${ids.length}`;
    const next = button("›", "link attempt-next", () => showAttempt(message, index + 1), "Next version");
    next.disabled = index === ids.length - 1;
    pager.append(previous, position, next);
    return pager;
  }

  function showAttempt(message, index) {
    const ids = attemptsOf(message);
    shownAttempt.set(message.replyTo, ids[index]);
    withScrollKept(() => {
      for (const id of ids) drawMessage(id);
      drawChrome();
    });
    // Keyboard users stay on the pager, now the shown version's.
    const footer = nodes.get(ids[index]).footer;
    const control = footer.querySelector(index < ids.indexOf(message.id) ? ".attempt-previous" : ".attempt-next");
    (control && !control.disabled ? control : footer.querySelector(".attempts button:not([disabled])") || textarea).focus();
  }

  // Regenerate: another reply to the last message, in a fresh session that never saw this one; this one is kept.
  // One id per click: the server answers a repeat with its first receipt.
  async function regenerate(message, control) {
    control.disabled = true;
    errorBox.hidden = true;
    const body = { clientMessageId: ImpoApi.newId() };
    if (isDevice) body.deviceId = ImpoDevice.id;
    const result = await ImpoApi.call("POST", `/api/v1/messages/${message.id}/regenerate`, body);
    control.disabled = false;
    if (!result.ok) ImpoUi.showError(errorBox, result.body);
    if (result.status === 409) await loadHistory();
    textarea.focus();
  }

  // The "thinking / doing" line: shown while the reply runs, until reply text follows its latest progress (a wait
  // or a running tool is said whatever text came before it).
  function drawProgress(message, node) {
    const live = liveStatusOf(message.id);
    const progress = state.progress.get(message.id) || ImpoProgress.empty();
    const doing = live ? ImpoChatTools.doingWords(message.id, live) : null;
    const visible = Boolean(live) && (doing !== null || !message.text || message.text.length === progress.textAt);
    ImpoProgress.draw(node.progress, progress, { doing, visible });
  }

  function drawFooter(message, node) {
    const live = liveStatusOf(message.id);
    const parked = [...state.active.values()].find((submission) => submission.messageId === message.id);
    // A parked run reconnects on its own; only a doubt given to staff says a person will check.
    const status = live === "pending_reconciliation" && parked.needsStaff ? "needs_staff" : live || message.status;
    const parts = [];
    if (!message.text && (live === "queued" || live === "running")) {
      const typing = document.createElement("span");
      typing.className = "typing";
      typing.setAttribute("role", "status");
      typing.setAttribute("aria-label", "The agent is writing");
      typing.append(document.createElement("i"), document.createElement("i"), document.createElement("i"));
      parts.push(typing);
    }
    const badge = document.createElement("span");
    // A finished reply needs no badge on screen; screen readers still hear that it finished. A wait that a tool
    // row of the reply already says ("Waiting for your approval") is not said twice, to the eye or the ear.
    const said = RUN_WORDS[status] !== undefined ? RUN_WORDS[status] : status;
    const toldByTool = [...node.tools.querySelectorAll(".tool-state")].some((words) => words.textContent === said);
    const quiet = status === "completed" || toldByTool;
    badge.className = `status status-${status}${quiet ? " visually-hidden" : ""}`;
    badge.dataset.status = status;
    badge.textContent = toldByTool ? "" : said;
    parts.push(badge);
    if (!live && message.createdAt) parts.push(ImpoUi.timeElement(message.createdAt));
    if (attemptsOf(message).length > 1) parts.push(attemptPager(message));
    const actions = [];
    if (!live && message.text) actions.push(ImpoUi.copyButton("Copy reply", () => message.text, { asIcon: true }));
    if (!live && status === "completed") actions.push(ImpoFeedback.controls(message));
    const error = message.error;
    const retryable = status === "failed" && !live && message.submissionId && error && error.retryable && isLatestAttempt(message);
    const ended = ["completed", "failed", "cancelled"].includes(status);
    // One control to try again: a retryable failure's own Try again, else Regenerate (another reply) on the last one.
    if (ended && !retryable && !live && state.active.size === 0 && lastMessage() === message) {
      const again = (event) => regenerate(message, event.currentTarget);
      actions.push(ImpoUi.iconButton("regenerate", "Regenerate", "regenerate", again, "Regenerate this reply"));
    }
    if (actions.length) parts.push(messageActions(actions));
    if (status === "failed" || status === "needs_staff") parts.push(runProblem(message, status));
    if (retryable) parts.push(button("Try again", "try-again", (event) => tryAgain(message, event.currentTarget)));
    node.footer.replaceChildren(...parts);
    node.item.classList.toggle("is-active", Boolean(live));
  }

  // A message's icon actions: out of sight until the message is hovered or holds the focus (chat.css), always in
  // sight on a touch screen; in the tab order throughout.
  function messageActions(actions) {
    const group = document.createElement("span");
    group.className = "message-actions";
    group.append(...actions);
    return group;
  }

  // Why the reply failed, in words, with its reason in sight (the code under Details), and whether a try again
  // failed too; or, for a doubt given to staff, that a person will check it.
  function runProblem(message, status) {
    const problem = paragraph("error run-error", "");
    const error = message.error || { code: status };
    const again = status === "failed" && message.retries > 0 ? "Tried again, and it failed again. " : "";
    const words = status === "needs_staff" ? ImpoUi.sentenceFor({ code: "needs_staff" }) : ImpoUi.runSentenceFor(error);
    ImpoUi.describeError(problem, error, again + words);
    if (status === "failed" && error.message && error.message !== words) {
      const reason = document.createElement("span");
      reason.className = "error-reason";
      reason.textContent = `Reason: ${error.message}`;
      problem.querySelector(".error-sentence").after(reason);
    }
    return problem;
  }

  // "Try again": the same submission queued as a new attempt (its text and error are cleared by the
  // `submission.accepted` the server projects again). One id per click, so a lost answer can be re-posted.
  async function tryAgain(message, control) {
    control.disabled = true;
    errorBox.hidden = true;
    const result = await ImpoApi.call("POST", `/api/v1/submissions/${message.submissionId}/retry`, { clientRetryId: ImpoApi.newId() });
    control.disabled = false;
    if (!result.ok) ImpoUi.showError(errorBox, result.body);
    if (result.status === 409) await loadHistory();
    announced.delete(message.id);
    textarea.focus();
  }

  // The parts of the page that depend on the whole conversation: the empty state and Send/Stop.
  function drawChrome() {
    emptyState.hidden = state.messages.size > 0;
    const stopping = state.active.size > 0 && !textarea.value.trim() && !ImpoAttachments.count();
    sendButton.textContent = stopping ? "Stop" : "Send";
    sendButton.dataset.mode = stopping ? "stop" : "send";
    // Off while a file uploads (or failed), and once the chat is deleted.
    sendButton.disabled = textarea.disabled || (!stopping && !ImpoAttachments.ready());
    sendButton.setAttribute("aria-label", stopping ? "Stop the reply" : "Send message");
  }

  window.ImpoChatMessages = { messageActions, loadHistory, withScrollKept, drawJump, jumpToLatest, renderAll, renderMessage, drawChrome };
})();
