// The chat's tool rows under a reply: each call's title, arguments, state in plain words, output or error, and
// Allow once / Always allow / Deny / Edit for a call waiting for its owner; and the "doing" words of the progress line.
(function () {
  "use strict";

  const { state, textarea, liveStatusOf, button, paragraph } = window.ImpoChatPage;
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

  function doingWords(messageId, live) {
    for (const tool of state.tools.values()) {
      if (tool.messageId !== messageId) continue;
      const name = ImpoToolCards.title(tool.toolName);
      if (tool.state === "awaiting_approval") return `${name} needs your answer`;
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

  // Allow once / Always allow for this tool (where the tool takes it) / Deny / Edit (the arguments as JSON) for a
  // call waiting for its owner; Deny asks for an optional reason, then Confirm deny or Cancel. Drawn once per
  // approval, so a redraw of the message never wipes what the person is typing; the answer shown afterwards comes
  // from the server's events (or the history after a reload), whichever device gave it.
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
    ImpoToolCards.approvalNote(note, approval.expiresAt);
    const problem = paragraph("tool-error", "");
    problem.hidden = true;
    const argumentsLabel = document.createElement("label");
    argumentsLabel.textContent = "Arguments (JSON)";
    const editor = document.createElement("textarea");
    editor.className = "approval-arguments";
    editor.rows = 3;
    editor.value = JSON.stringify(tool.input || {}, null, 2);
    argumentsLabel.append(editor);
    argumentsLabel.hidden = true;
    const allow = (remember) => {
      const body = remember ? { decision: "approve", remember: true } : { decision: "approve" };
      if (argumentsLabel.hidden) return decide(approval.approvalId, body, problem);
      try {
        body.arguments = JSON.parse(editor.value);
      } catch (error) {
        return showProblem(problem, `The arguments are not JSON: ${error.message}`);
      }
      return decide(approval.approvalId, body, problem);
    };
    const once = button("Allow once", "approval-approve", () => allow(false));
    const always = ImpoToolCards.alwaysAllowable(tool.toolName) ? button("Always allow for this tool", "secondary approval-always", () => allow(true)) : null;
    const deny = button("Deny", "secondary approval-deny", () => {
      choices.hidden = true;
      denial.hidden = false;
      reason.focus();
    });
    const edit = button("Edit", "secondary approval-edit", () => {
      argumentsLabel.hidden = false;
      edit.hidden = true;
      once.textContent = "Allow once with these arguments";
      editor.focus();
    });
    const choices = document.createElement("div");
    choices.className = "approval-actions";
    choices.append(...[once, always, deny, edit].filter(Boolean));
    const denial = denyForm(approval, problem, () => {
      denial.hidden = true;
      choices.hidden = false;
      deny.focus();
    });
    const reason = denial.querySelector(".approval-reason");
    box.replaceChildren(note, argumentsLabel, choices, denial, problem);
  }

  // After Deny: why (optional, the agent reads it), then Confirm deny, or Cancel back to the choices.
  function denyForm(approval, problem, cancel) {
    const form = document.createElement("div");
    form.className = "approval-denial";
    form.hidden = true;
    const label = document.createElement("label");
    label.textContent = "Reason (optional, the agent reads it)";
    const reason = document.createElement("input");
    reason.type = "text";
    reason.className = "approval-reason";
    reason.maxLength = 2000;
    label.append(reason);
    const confirm = button("Confirm deny", "approval-confirm-deny", () => {
      const body = { decision: "deny" };
      if (reason.value.trim()) body.reason = reason.value;
      return decide(approval.approvalId, body, problem);
    });
    const back = button("Cancel", "secondary approval-cancel-deny", cancel);
    const actions = document.createElement("div");
    actions.className = "approval-actions";
    actions.append(confirm, back);
    form.append(label, actions);
    return form;
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
    if (result.status === 409 || result.status === 410) await ImpoChatMessages.loadHistory();
  }

  window.ImpoChatTools = { draw: drawTools, doingWords };
})();
