// Editing a sent message as a branch (docs/api.md "Edit"): Edit on the last message opens it in place (Save sends its
// new words as a new version, Cancel or Escape leaves it as it was), and "‹ 1 / 2 ›" on a message pages between its
// versions. Each version keeps its own replies; what came after the current version belongs to its branch only, so
// paging back to an earlier version shows that version's replies and nothing after them. Loaded after
// chat_messages.js, whose drawing of a user message (and of which reply is shown) asks this one.
(function () {
  "use strict";

  const shared = window.ImpoChatPage;
  const { state, nodes, errorBox, textarea, isDevice, lastUserMessageId, button } = shared;
  const shownVersion = new Map(); // first version's id -> the version the reader chose
  let editing = null; // {messageId, editor}: the message open for editing, at most one

  function versionsOf(message) {
    return message.versionIds && message.versionIds.length ? message.versionIds : [message.id];
  }

  function chosenVersion(message) {
    const ids = versionsOf(message);
    return shownVersion.get(ids[0]) || ids[ids.length - 1];
  }

  // Messages from this sequence on belong to a branch the reader paged away from: the one after the earliest
  // version chosen that is not its message's current one.
  function branchEnd() {
    let end = Infinity;
    for (const chosen of shownVersion.values()) {
      const message = state.messages.get(chosen);
      if (!message) continue;
      const ids = versionsOf(message);
      const next = state.messages.get(ids[ids.indexOf(chosen) + 1]);
      if (next) end = Math.min(end, next.sequence);
    }
    return end;
  }

  function isShownUser(message) {
    return message.sequence < branchEnd() && chosenVersion(message) === message.id;
  }

  // A reply is on the branch shown when the version it answers is.
  function isOnShownBranch(reply) {
    const asked = reply.replyTo && state.messages.get(reply.replyTo);
    return reply.sequence < branchEnd() && (!asked || isShownUser(asked));
  }

  function isLastExchange(message) {
    return versionsOf(message).includes(lastUserMessageId());
  }

  // A user message: shown or not, its words or its editor, and under it the time it was sent, its versions and,
  // on the last one, Edit.
  function drawUser(message, node) {
    const shown = isShownUser(message);
    node.item.hidden = !shown;
    const open = editing && editing.messageId === message.id;
    node.body.hidden = Boolean(open);
    if (open && !editing.editor.isConnected) node.item.insertBefore(editing.editor, node.footer);
    const parts = [];
    if (message.createdAt) parts.push(ImpoUi.timeElement(message.createdAt));
    if (versionsOf(message).length > 1) parts.push(versionPager(message));
    if (shown && !open && isLastExchange(message)) {
      const words = `Edit your message: ${message.text.slice(0, 40)}`;
      const edit = ImpoUi.iconButton("edit", "Edit", "edit-message", () => openEditor(message), words);
      parts.push(ImpoChatMessages.messageActions([edit]));
    }
    node.footer.replaceChildren(...parts);
  }

  function versionPager(message) {
    const ids = versionsOf(message);
    const index = ids.indexOf(message.id);
    const pager = document.createElement("span");
    pager.className = "attempts versions";
    pager.setAttribute("role", "group");
    pager.setAttribute("aria-label", "Versions of this message");
    const previous = button("‹", "link version-previous", () => showVersion(message, index - 1), "Previous version");
    previous.disabled = index === 0;
    const position = document.createElement("span");
    position.className = "version-position";
    position.textContent = `${index + 1} / ${ids.length}`;
    const next = button("›", "link version-next", () => showVersion(message, index + 1), "Next version");
    next.disabled = index === ids.length - 1;
    pager.append(previous, position, next);
    return pager;
  }

  function showVersion(message, index) {
    const ids = versionsOf(message);
    if (index === ids.length - 1) shownVersion.delete(ids[0]);
    else shownVersion.set(ids[0], ids[index]);
    window.ImpoChatMessages.renderAll();
    // Keyboard users stay on the pager, now the shown version's.
    const footer = nodes.get(ids[index]).footer;
    const control = footer.querySelector(index < ids.indexOf(message.id) ? ".version-previous" : ".version-next");
    (control && !control.disabled ? control : footer.querySelector(".versions button:not([disabled])") || textarea).focus();
  }

  function openEditor(message) {
    if (editing) closeEditor();
    const editor = document.createElement("div");
    editor.className = "message-editor";
    const field = document.createElement("textarea");
    field.className = "edit-text";
    field.value = message.text;
    field.maxLength = textarea.maxLength;
    field.setAttribute("aria-label", "Edit your message");
    const saveButton = button("Save", "edit-save", () => save(message));
    const cancelButton = button("Cancel", "secondary edit-cancel", () => closeEditor({ focusEdit: true }));
    const actions = document.createElement("div");
    actions.className = "edit-actions";
    actions.append(saveButton, cancelButton);
    editor.append(field, actions);
    editor.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        event.preventDefault();
        closeEditor({ focusEdit: true });
      } else if (event.target === field && ImpoUi.enterSends(event)) {
        event.preventDefault();
        save(message);
      }
    });
    editing = { messageId: message.id, editor, field, controls: [saveButton, cancelButton] };
    window.ImpoChatMessages.renderMessage(message.id);
    field.style.height = `${Math.min(field.scrollHeight + 2, window.innerHeight / 3)}px`;
    field.focus();
    field.setSelectionRange(field.value.length, field.value.length);
  }

  function closeEditor({ focusEdit = false } = {}) {
    if (!editing) return;
    const { messageId, editor } = editing;
    editing = null;
    editor.remove();
    window.ImpoChatMessages.renderMessage(messageId);
    const edit = focusEdit && nodes.has(messageId) && nodes.get(messageId).footer.querySelector(".edit-message");
    (edit || textarea).focus();
  }

  // Save: the new words as a new version, answered in a fresh session; the version edited stays, with its replies.
  // One id per click: the server answers a repeat with its first receipt.
  async function save(message) {
    const opened = editing;
    const text = opened.field.value;
    if (!text.trim()) return opened.field.focus();
    for (const control of opened.controls) control.disabled = true;
    errorBox.hidden = true;
    const body = { clientMessageId: ImpoApi.newId(), text };
    if (isDevice) body.deviceId = ImpoDevice.id;
    const result = await ImpoApi.call("POST", `/api/v1/messages/${message.id}/edit`, body);
    for (const control of opened.controls) control.disabled = false;
    if (result.ok) {
      shownVersion.delete(versionsOf(message)[0]); // the new version is shown, as it arrives
      if (editing === opened) closeEditor();
      return;
    }
    ImpoUi.showError(errorBox, result.body);
    const error = result.body && result.body.error;
    if (result.status === 409 && error && error.code === "edit_not_last") {
      if (editing === opened) closeEditor();
      await window.ImpoChatMessages.loadHistory();
    } else if (editing === opened) {
      opened.field.focus();
    }
  }

  // `submission.accepted` of an edit: the new version joins the versions of the one it edits and is shown from now
  // on. The ids of every message from the first version on, to redraw (the earlier branch is hidden).
  function acceptVersion(versionId, editedId) {
    const edited = state.messages.get(editedId);
    const ids = edited ? [...versionsOf(edited), versionId] : [versionId];
    for (const id of ids) if (state.messages.has(id)) state.messages.get(id).versionIds = ids;
    shownVersion.delete(ids[0]);
    const first = state.messages.get(ids[0]);
    return [...state.messages.values()].filter((m) => !first || m.sequence >= first.sequence).map((m) => m.id);
  }

  window.ImpoChatEdit = { drawUser, isOnShownBranch, acceptVersion };
})();
