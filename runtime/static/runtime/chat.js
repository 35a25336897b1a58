// Main Chat and task views. History comes from REST; live updates from the conversation websocket,
// resumed with `after=<last seq>`. A socket that closes while a run is active is not taken as
// success: the page re-reads history (the database's truth) and resubscribes.
//
// Rendering is keyed: each message owns one list item, and an event redraws only the message it
// touches, so a streaming reply neither resets the reader's scroll position nor their selection
// elsewhere on the page.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const list = document.getElementById("messages");
  const emptyState = document.getElementById("empty-state");
  const indicator = document.getElementById("connection");
  const errorBox = document.getElementById("chat-error");
  const composer = document.getElementById("composer");
  const textarea = document.getElementById("message-text");
  const sendButton = document.getElementById("send");
  const sendChoice = document.getElementById("send-choice");
  const composerNote = document.getElementById("composer-note");
  const announcer = document.getElementById("announcer");
  const jumpButton = document.getElementById("jump-to-latest");
  const editNote = document.getElementById("edit-note");
  const conversationId = root.dataset.conversationId;
  const historyUrl = root.dataset.historyUrl;
  const sendUrl = root.dataset.sendUrl;
  const isDevice = root.dataset.device === "on"; // Main Chat only: Tasks never get device tools
  const NEAR_BOTTOM_PX = 48;

  // Plain words for the states a person sees; the codes stay in data attributes and classes.
  const RUN_WORDS = {
    pending: "Queued",
    queued: "Queued",
    running: "Replying…",
    streaming: "Replying…",
    waiting_device: "Waiting for your device",
    waiting_approval: "Waiting for your approval",
    pending_reconciliation: "Couldn't confirm — a person will check",
    completed: "Completed",
    failed: "Failed",
    cancelled: "Stopped",
  };
  const TOOL_WORDS = {
    requested: "Running…",
    awaiting_approval: "Waiting for your approval",
    waiting_device: "Waiting for your device",
    accepted: "Running on your device",
    completed: "Done",
    failed: "Failed",
    uncertain: "Couldn't confirm — a person will check",
    checked_by_staff: "Checked by support",
  };
  const state = {
    messages: new Map(), // id -> {id, role, sequence, text, status, error}
    active: new Map(), // submissionId -> {messageId, status}
    // toolCallId -> {messageId, toolName, state, input, output, errorCode, errorMessage, device, approval}
    tools: new Map(),
    progress: new Map(), // messageId -> its transient progress (ImpoProgress), while it runs
    lastSeq: 0,
  };
  const nodes = new Map(); // message id -> {item, body, tools, footer, progress, drawnText}
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
  const announced = new Set(); // replies read out once by the live region

  function setConnection(label, value) {
    indicator.dataset.state = label;
    indicator.textContent = value;
  }

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
    state.active = new Map(page.activeSubmissions.map((s) => [s.submissionId, { messageId: s.messageId, status: s.status }]));
    state.lastSeq = page.lastEventSeq;
    for (const message of messages.values()) if (message.role === "assistant" && message.status !== "pending") announced.add(message.id);
    renderAll();
  }

  function liveStatusOf(messageId) {
    for (const submission of state.active.values()) if (submission.messageId === messageId) return submission.status;
    return null;
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
    item.append(label, progress, tools, body, footer);
    node = { item, body, tools, footer, progress, drawnText: null };
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
    if (message.role !== "assistant") return drawUserFooter(message, node);
    node.item.hidden = !isShown(message);
    drawTools(id, node);
    drawProgress(message, node);
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

  function lastUserMessageId() {
    let last = null;
    for (const message of state.messages.values()) if (message.role === "user" && (!last || message.sequence > last.sequence)) last = message;
    return last && last.id;
  }

  // Regenerated replies (docs/api.md "Regenerate"): every attempt at a user message is a message of its own, and one
  // is shown at a time — the latest, unless the reader pages back with "‹ 1 / 2 ›".
  const shownAttempt = new Map(); // user message id -> the attempt the reader chose

  function attemptsOf(message) {
    return message.attemptIds && message.attemptIds.length ? message.attemptIds : [message.id];
  }

  function isLatestAttempt(message) {
    const ids = attemptsOf(message);
    return ids[ids.length - 1] === message.id;
  }

  function isShown(message) {
    const chosen = message.replyTo && shownAttempt.get(message.replyTo);
    return chosen ? chosen === message.id : isLatestAttempt(message);
  }

  function lastMessage() {
    let last = null;
    for (const message of state.messages.values()) if (!last || message.sequence > last.sequence) last = message;
    return last;
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

  // The time it was sent, and on the last one an Edit that puts its text back in the composer: sending it
  // then is a new message; the old one stays in the history.
  function drawUserFooter(message, node) {
    const parts = [];
    if (message.createdAt) parts.push(ImpoUi.timeElement(message.createdAt));
    if (message.id === lastUserMessageId()) {
      parts.push(button("Edit", "link edit-message", () => startEdit(message), `Edit and send again: ${message.text.slice(0, 40)}`));
    }
    node.footer.replaceChildren(...parts);
  }

  function startEdit(message) {
    textarea.value = message.text;
    editNote.hidden = false;
    growComposer();
    drawChrome();
    textarea.focus();
    textarea.setSelectionRange(textarea.value.length, textarea.value.length);
  }

  function endEdit() {
    editNote.hidden = true;
  }

  function drawTools(messageId, node) {
    const seen = new Set();
    for (const [callId, tool] of state.tools) {
      if (tool.messageId !== messageId) continue;
      seen.add(callId);
      let row = node.tools.querySelector(`[data-tool-call-id="${CSS.escape(callId)}"]`);
      if (!row) {
        row = document.createElement("details");
        row.dataset.toolCallId = callId;
        const summary = document.createElement("summary");
        const name = document.createElement("span");
        name.className = "tool-name";
        const args = document.createElement("span");
        args.className = "tool-args";
        const words = document.createElement("span");
        words.className = "tool-state";
        summary.append(name, args, words);
        const detail = document.createElement("div");
        detail.className = "tool-detail";
        const approval = document.createElement("div");
        approval.className = "tool-approval";
        row.append(summary, detail, approval);
        node.tools.append(row);
      }
      const waiting = tool.device || liveStatusOf(messageId) === "waiting_device";
      const byStaff = (tool.output && tool.output.reconciled) || (tool.errorCode || "").startsWith("reconciled_");
      const shown = byStaff ? "checked_by_staff" : tool.state === "requested" && waiting ? "waiting_device" : tool.state;
      row.className = `tool tool-${tool.state}`;
      row.dataset.state = tool.state;
      row.querySelector(".tool-name").textContent = ImpoToolCards.title(tool.toolName);
      row.querySelector(".tool-args").textContent = ImpoToolCards.argumentSummary(tool.input);
      row.querySelector(".tool-state").textContent = TOOL_WORDS[shown] || tool.state;
      row.querySelector(".tool-detail").replaceChildren(...toolDetail(tool));
      drawApproval(row.querySelector(".tool-approval"), tool);
      if (tool.state === "failed" || tool.state === "uncertain" || tool.state === "awaiting_approval") row.open = true;
    }
    for (const row of [...node.tools.children]) if (!seen.has(row.dataset.toolCallId)) row.remove();
  }

  // The "thinking / doing" line: shown while the reply runs, until reply text follows its latest progress (a wait
  // or a running tool is said whatever text came before it).
  function drawProgress(message, node) {
    const live = liveStatusOf(message.id);
    const progress = state.progress.get(message.id) || ImpoProgress.empty();
    const doing = live ? doingWords(message.id, live) : null;
    const visible = Boolean(live) && (doing !== null || !message.text || message.text.length === progress.textAt);
    ImpoProgress.draw(node.progress, progress, { doing, visible });
  }

  function doingWords(messageId, live) {
    for (const tool of state.tools.values()) {
      if (tool.messageId !== messageId) continue;
      const name = ImpoToolCards.title(tool.toolName);
      if (tool.state === "awaiting_approval") return `Waiting for your approval to run ${name}`;
      if (tool.state === "accepted") return `Your device is running ${name}`;
      if (tool.state === "requested" && (tool.device || live === "waiting_device")) return `Waiting for your device to run ${name}`;
      if (tool.state === "requested") return `Running ${name}…`;
    }
    return null;
  }

  function toolDetail(tool) {
    const parts = [];
    const block = (title, value, className) => {
      const heading = document.createElement("div");
      heading.className = "tool-label";
      heading.textContent = title;
      const pre = document.createElement("pre");
      pre.className = className || "";
      pre.textContent = typeof value === "string" ? value : JSON.stringify(value, null, 2);
      parts.push(heading, pre);
    };
    const about = ImpoToolCards.summary(tool.toolName);
    if (about) parts.push(paragraph("tool-about", about));
    if (tool.input !== undefined && tool.input !== null && tool.input !== "") {
      // The arguments as the agent sent them, for whoever wants the exact JSON (the summary line has the gist).
      const raw = document.createElement("details");
      raw.className = "tool-raw";
      const rawSummary = document.createElement("summary");
      rawSummary.textContent = "Details";
      const pre = document.createElement("pre");
      pre.textContent = `${tool.toolName} ${JSON.stringify(tool.input, null, 2)}`;
      raw.append(rawSummary, pre);
      parts.push(raw);
    }
    if (tool.output && tool.output.reconciled) parts.push(paragraph("tool-note", ImpoUi.sentenceFor({ code: "reconciled_succeeded" })));
    else if (tool.output !== undefined && tool.output !== null) block("Output", tool.output);
    // A staff decision is shown as such, never with the wording (or name) the desk recorded it with; other
    // failures in the tool's own words (written for the person: "No sound named …"), the code under Details.
    if (tool.errorCode && tool.errorCode.startsWith("reconciled_")) parts.push(paragraph("tool-error", ImpoUi.sentenceFor({ code: tool.errorCode })));
    else if (tool.errorCode || tool.errorMessage) {
      const problem = paragraph("tool-error", "");
      ImpoUi.describeError(problem, { code: tool.errorCode, message: tool.errorMessage }, tool.errorMessage);
      parts.push(problem);
    }
    return parts;
  }

  // Approve / Deny (with a reason) / Edit (the arguments as JSON) for a call waiting for its owner. Drawn once per
  // approval, so a redraw of the message never wipes what the person is typing; the answer shown afterwards
  // comes from the server's events (or the history after a reload), whichever device gave it.
  function drawApproval(box, tool) {
    const approval = tool.approval;
    const pending = tool.state === "awaiting_approval" && approval && approval.status === "pending";
    if (!pending) {
      box.replaceChildren();
      delete box.dataset.approvalId;
      return;
    }
    if (box.dataset.approvalId === approval.approvalId) return;
    box.dataset.approvalId = approval.approvalId;
    const note = paragraph("tool-note", "");
    ImpoToolCards.approvalNote(note, tool.toolName, approval.expiresAt);
    const problem = paragraph("tool-error", "");
    problem.hidden = true;
    const reasonLabel = document.createElement("label");
    reasonLabel.textContent = "Reason (the agent reads it)";
    const reason = document.createElement("input");
    reason.type = "text";
    reason.className = "approval-reason";
    reason.maxLength = 2000;
    reasonLabel.append(reason);
    const argumentsLabel = document.createElement("label");
    argumentsLabel.textContent = "Arguments (JSON)";
    const editor = document.createElement("textarea");
    editor.className = "approval-arguments";
    editor.rows = 3;
    editor.value = JSON.stringify(tool.input || {}, null, 2);
    argumentsLabel.append(editor);
    argumentsLabel.hidden = true;
    const approve = button("Approve", "approval-approve", () => {
      if (argumentsLabel.hidden) return decide(approval.approvalId, { decision: "approve" }, problem);
      let edited;
      try {
        edited = JSON.parse(editor.value);
      } catch (error) {
        return showProblem(problem, `The arguments are not JSON: ${error.message}`);
      }
      return decide(approval.approvalId, { decision: "approve", arguments: edited }, problem);
    });
    const deny = button("Deny", "secondary approval-deny", () => {
      const body = { decision: "deny" };
      if (reason.value.trim()) body.reason = reason.value;
      return decide(approval.approvalId, body, problem);
    });
    const edit = button("Edit", "secondary approval-edit", () => {
      argumentsLabel.hidden = false;
      edit.hidden = true;
      approve.textContent = "Approve with these arguments";
      editor.focus();
    });
    const actions = document.createElement("div");
    actions.className = "approval-actions";
    actions.append(approve, deny, edit);
    box.replaceChildren(note, argumentsLabel, reasonLabel, actions, problem);
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

  function showProblem(element, text) {
    element.textContent = text;
    element.hidden = false;
  }

  // One decision id per click: a retry of a lost answer would reuse it, another click is another answer.
  async function decide(approvalId, body, problem) {
    const result = await ImpoApi.call("POST", `/api/v1/tool-calls/${approvalId}/approval`, {
      ...body,
      clientDecisionId: ImpoApi.newId(),
    });
    if (result.ok) {
      textarea.focus(); // the choice is gone from the page: focus goes back where the person types
      return;
    }
    ImpoUi.showError(problem, result.body);
    // Answered elsewhere (409) or too late (410): the history has what was decided.
    if (result.status === 409 || result.status === 410) await loadHistory();
  }

  function paragraph(className, text) {
    const element = document.createElement("p");
    element.className = className;
    element.textContent = text;
    return element;
  }

  function drawFooter(message, node) {
    const live = liveStatusOf(message.id);
    const status = live || message.status;
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
    // row of the reply already says ("Waiting for your approval") is not said twice.
    const said = RUN_WORDS[status] !== undefined ? RUN_WORDS[status] : status;
    const toldByTool = [...node.tools.querySelectorAll(".tool-state")].some((words) => words.textContent === said);
    const quiet = status === "completed" || toldByTool;
    badge.className = `status status-${status}${quiet ? " visually-hidden" : ""}`;
    badge.dataset.status = status;
    badge.textContent = said;
    parts.push(badge);
    if (!live && message.createdAt) parts.push(ImpoUi.timeElement(message.createdAt));
    if (!live && message.text) parts.push(ImpoUi.copyButton("Copy reply", () => message.text));
    if (attemptsOf(message).length > 1) parts.push(attemptPager(message));
    const ended = ["completed", "failed", "cancelled"].includes(status);
    if (ended && !live && state.active.size === 0 && lastMessage() === message) {
      parts.push(button("Regenerate", "regenerate", (event) => regenerate(message, event.currentTarget), "Regenerate this reply"));
    }
    const error = message.error;
    if (status === "failed" || status === "pending_reconciliation") {
      const problem = paragraph("error run-error", "");
      const runError = error || { code: status };
      ImpoUi.describeError(problem, runError, ImpoUi.runSentenceFor(runError));
      parts.push(problem);
    }
    if (status === "failed" && !live && message.submissionId && error && error.retryable && isLatestAttempt(message)) {
      parts.push(button("Try again", "try-again", (event) => tryAgain(message, event.currentTarget)));
    }
    node.footer.replaceChildren(...parts);
    node.item.classList.toggle("is-active", Boolean(live));
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
    const stopping = state.active.size > 0 && !textarea.value.trim();
    sendButton.textContent = stopping ? "Stop" : "Send";
    sendButton.dataset.mode = stopping ? "stop" : "send";
    sendButton.setAttribute("aria-label", stopping ? "Stop the reply" : "Send message");
  }

  const handlers = {
    "submission.accepted"(event) {
      const { userMessage, assistantMessage, submissionId, replacesMessageId } = event.payload;
      const previousLast = lastUserMessageId();
      const previousReply = lastMessage();
      const sent = (state.messages.get(userMessage.id) || {}).createdAt || event.createdAt;
      state.messages.set(userMessage.id, { ...userMessage, role: "user", status: "completed", createdAt: sent });
      // A regeneration is the latest attempt, shown from now on; a retry keeps the attempts as they were.
      const replaced = replacesMessageId && state.messages.get(replacesMessageId);
      const known = state.messages.get(assistantMessage.id);
      const attemptIds = replaced ? [...attemptsOf(replaced), assistantMessage.id] : known ? attemptsOf(known) : [assistantMessage.id];
      if (replaced) {
        for (const id of attemptIds) if (state.messages.has(id)) state.messages.get(id).attemptIds = attemptIds;
        shownAttempt.delete(userMessage.id);
      }
      state.messages.set(assistantMessage.id, {
        ...assistantMessage,
        role: "assistant",
        text: "",
        status: "pending",
        createdAt: event.createdAt,
        submissionId,
        replyTo: userMessage.id,
        attemptIds,
      });
      announced.delete(assistantMessage.id);
      // A retry starts the reply again: what its failed attempt showed (tool rows) is not this attempt's.
      for (const [callId, tool] of state.tools) if (tool.messageId === assistantMessage.id) state.tools.delete(callId);
      state.progress.delete(assistantMessage.id);
      state.active.set(submissionId, { messageId: assistantMessage.id, status: "queued" });
      return [previousLast, previousReply && previousReply.id, userMessage.id, ...attemptIds];
    },
    "run.started"(event) {
      return setActive(event.submissionId, "running");
    },
    "run.pending_reconciliation"(event) {
      const id = setActive(event.submissionId, "pending_reconciliation");
      const message = state.messages.get(id);
      if (message) message.error = { code: "pending_reconciliation", message: event.payload.reason };
      return id;
    },
    "text.delta"(event) {
      const message = state.messages.get(event.payload.messageId);
      if (!message) return null;
      message.text += event.payload.delta;
      message.status = "streaming";
      return message.id;
    },
    "run.progress"(event) {
      const message = state.messages.get(event.payload.messageId);
      if (!message) return null;
      const progress = state.progress.get(message.id) || ImpoProgress.empty();
      state.progress.set(message.id, ImpoProgress.take(progress, event.payload, message.text.length));
      return message.id;
    },
    "tool.requested"(event) {
      const id = trackTool(event, { state: "requested", input: event.payload.input, device: Boolean(event.payload.device) });
      // Only the listing + claim authorise running it; the event is a wake-up, never an order.
      if (isDevice && event.payload.device && event.payload.device.deviceId === ImpoDevice.id) ImpoDevice.check();
      return id;
    },
    "tool.accepted"(event) {
      const id = trackTool(event, { state: "accepted" });
      if (event.payload.status) setActive(event.submissionId, event.payload.status);
      return id;
    },
    "tool.completed"(event) {
      const error = event.payload.error;
      return trackTool(event, {
        state: error ? "failed" : "completed",
        output: error ? null : event.payload.output,
        errorCode: error ? error.code : null,
        errorMessage: error ? error.message : null,
      });
    },
    "tool.approval_requested"(event) {
      const { approvalId, expiresAt } = event.payload;
      setActive(event.submissionId, "waiting_approval");
      return trackTool(event, { state: "awaiting_approval", approval: { approvalId, status: "pending", expiresAt } });
    },
    "tool.approval_decided"(event) {
      const { approvalId, decision, outcome, input, device } = event.payload;
      const previous = state.tools.get(event.payload.toolCallId) || {};
      const approval = { ...(previous.approval || {}), approvalId, status: decision, outcome };
      const id = trackTool(event, { state: decision === "approved" ? "requested" : "failed", approval, input, device: Boolean(device) });
      if (isDevice && device && device.deviceId === ImpoDevice.id) ImpoDevice.check();
      return id;
    },
    "tool.uncertain"(event) {
      return trackTool(event, { state: "uncertain", errorCode: event.payload.code, errorMessage: event.payload.message });
    },
    "run.completed": finish,
    "run.failed": finish,
    "run.cancelled": finish,
  };

  function setActive(submissionId, status) {
    const submission = state.active.get(submissionId);
    if (!submission) return null;
    submission.status = status;
    return submission.messageId;
  }

  function trackTool(event, changes) {
    const submission = state.active.get(event.submissionId);
    const previous = state.tools.get(event.payload.toolCallId) || {};
    const messageId = previous.messageId || (submission && submission.messageId) || event.payload.messageId;
    state.tools.set(event.payload.toolCallId, {
      ...previous,
      messageId,
      toolName: event.payload.toolName || previous.toolName || "tool",
      ...changes,
    });
    return messageId;
  }

  function finish(event) {
    const message = state.messages.get(event.payload.messageId);
    if (message) {
      message.status = event.payload.status;
      message.error = event.payload.error || null;
    }
    state.active.delete(event.submissionId);
    state.progress.delete(event.payload.messageId); // replaced by the reply: transient, gone with the run
    return event.payload.messageId;
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
    const handler = handlers[event.type];
    const touched = handler ? handler(event) : null;
    for (const id of Array.isArray(touched) ? touched : [touched]) if (id) renderMessage(id);
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
    if (!text.trim()) return;
    if (!policy && state.active.size > 0) {
      offerSendChoice();
      return;
    }
    sendChoice.hidden = true;
    errorBox.hidden = true;
    endEdit();
    textarea.focus();
    const fields = isDevice ? { text, deviceId: ImpoDevice.id } : { text };
    if (policy) fields.messagePolicy = policy;
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
    if (event.key === "Escape" && !editNote.hidden) {
      textarea.value = "";
      endEdit();
      growComposer();
      drawChrome();
      return;
    }
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
  // The composer grows with its text, up to a third of the screen, then scrolls.
  function growComposer() {
    textarea.style.height = "auto";
    textarea.style.height = `${Math.min(textarea.scrollHeight + 2, window.innerHeight / 3)}px`;
  }
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
