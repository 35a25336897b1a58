// What each live event of the conversation changes in the page's `state`, and which messages it touches (the
// caller redraws those). Events arrive in order and once each: chat.js applies them by their `seq`.
(function () {
  "use strict";

  const { state, announced, shownAttempt, isDevice, lastUserMessageId, lastMessage, attemptsOf } = window.ImpoChatPage;

  const handlers = {
    "submission.accepted"(event) {
      const { userMessage, assistantMessage, submissionId, replacesMessageId, editsMessageId } = event.payload;
      const previousLast = lastUserMessageId();
      const previousReply = lastMessage();
      const known = state.messages.get(userMessage.id) || {}; // a retry's: its versions stay
      const sent = known.createdAt || event.createdAt;
      state.messages.set(userMessage.id, { ...known, ...userMessage, role: "user", status: "completed", createdAt: sent });
      // An edit is the latest version of the message it edits, shown from now on with its branch.
      const branched = editsMessageId ? ImpoChatEdit.acceptVersion(userMessage.id, editsMessageId) : [];
      // A regeneration is the latest attempt, shown from now on; a retry keeps the attempts as they were.
      const replaced = replacesMessageId && state.messages.get(replacesMessageId);
      const knownReply = state.messages.get(assistantMessage.id);
      const attemptIds = replaced ? [...attemptsOf(replaced), assistantMessage.id] : knownReply ? attemptsOf(knownReply) : [assistantMessage.id];
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
        retries: event.payload.retry || 0,
      });
      announced.delete(assistantMessage.id);
      // A retry starts the reply again: what its failed attempt showed (tool rows) is not this attempt's.
      for (const [callId, tool] of state.tools) if (tool.messageId === assistantMessage.id) state.tools.delete(callId);
      state.progress.delete(assistantMessage.id);
      state.active.set(submissionId, { messageId: assistantMessage.id, status: "queued" });
      return [previousLast, previousReply && previousReply.id, userMessage.id, ...attemptIds, ...branched];
    },
    "run.started"(event) {
      // A run claimed again while the provider is out is not heard from yet: it still reconnects.
      const submission = state.active.get(event.submissionId);
      return setActive(event.submissionId, submission && submission.status === "reconnecting" ? "reconnecting" : "running");
    },
    "run.reconnecting"(event) {
      if (event.payload.reconnecting) return setActive(event.submissionId, "reconnecting");
      return heard(event.submissionId);
    },
    "run.pending_reconciliation"(event) {
      const id = setActive(event.submissionId, "pending_reconciliation");
      state.active.get(event.submissionId).needsStaff = Boolean(event.payload.needsStaff);
      const message = state.messages.get(id);
      if (message) message.error = { code: "pending_reconciliation", message: event.payload.reason };
      return id;
    },
    "text.delta"(event) {
      const message = state.messages.get(event.payload.messageId);
      if (!message) return null;
      message.text += event.payload.delta;
      message.status = "streaming";
      heard(event.submissionId);
      ImpoProgress.replied(state.progress.get(message.id), event.createdAt);
      return message.id;
    },
    "run.session_replaced"(event) {
      // The provider had lost the session: the reply starts again in a new one, and what the lost one had said of it
      // is withdrawn (the history holds only the new answer).
      const message = state.messages.get(event.payload.messageId);
      if (!message || !event.payload.replyRestarted) return null;
      message.text = "";
      state.progress.delete(message.id);
      return message.id;
    },
    "run.progress"(event) {
      const message = state.messages.get(event.payload.messageId);
      if (!message) return null;
      heard(event.submissionId);
      const progress = state.progress.get(message.id) || ImpoProgress.empty();
      state.progress.set(message.id, ImpoProgress.take(progress, event.payload, message.text.length, event.createdAt));
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

  // The agent was heard from (its words, its thinking): a run that was reconnecting runs again.
  function heard(submissionId) {
    const submission = state.active.get(submissionId);
    return submission && submission.status === "reconnecting" ? setActive(submissionId, "running") : submission && submission.messageId;
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
      message.reasoning = event.payload.reasoning || null; // kept by the server: the live progress goes below
    }
    state.active.delete(event.submissionId);
    state.progress.delete(event.payload.messageId); // replaced by the reply: transient, gone with the run
    return event.payload.messageId;
  }

  // The ids of the messages an event touches, once it is applied (an event of a kind not drawn touches none).
  function apply(event) {
    const handler = handlers[event.type];
    const touched = handler ? handler(event) : null;
    return Array.isArray(touched) ? touched : [touched];
  }

  window.ImpoChatEvents = { apply };
})();
