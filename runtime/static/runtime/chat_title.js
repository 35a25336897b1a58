// Renaming the chat from its header: Rename opens a field with the title, Enter (or Save) sends it with
// PATCH /api/v1/conversations/<id>, Escape (or Cancel) puts the title back. The sidebar is read again after.
// Clear (Main Chat only), once confirmed, deletes Main Chat's conversation (DELETE /api/v1/conversation) and loads
// the page again, which opens a new, empty one.
(function () {
  "use strict";

  const root = document.getElementById("chat");
  const heading = document.getElementById("chat-title");
  const open = document.getElementById("rename-chat");
  const form = document.getElementById("rename-form");
  const input = document.getElementById("rename-input");
  const cancel = document.getElementById("rename-cancel");
  const problem = document.getElementById("rename-error");
  if (!root || !open) return;
  const clear = document.getElementById("clear-chat");
  const url = `/api/v1/conversations/${root.dataset.conversationId}`;
  const SITE_SUFFIX = " · Impo";

  function editing(on) {
    heading.hidden = on;
    open.hidden = on;
    form.hidden = !on;
    problem.hidden = true;
    input.removeAttribute("aria-invalid");
    if (on) {
      input.value = heading.textContent;
      input.focus();
      input.select();
    }
  }

  open.addEventListener("click", () => editing(true));
  cancel.addEventListener("click", () => {
    editing(false);
    open.focus();
  });
  input.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.stopPropagation();
    editing(false);
    open.focus();
  });
  if (clear) {
    clear.addEventListener("click", async () => {
      if (!confirm("Clear Main Chat? Its messages are deleted for good, here and at the assistant.")) return;
      const result = await ImpoApi.call("DELETE", "/api/v1/conversation");
      if (!result.ok) {
        ImpoUi.showError(problem, result.body);
        return;
      }
      location.reload();
    });
  }

  function refused(show) {
    input.setAttribute("aria-invalid", "true");
    show();
    problem.hidden = false;
    input.focus();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    // Said here in words: the server's answer to a blank title is the form's generic "needs fixing".
    if (!input.value.trim()) {
      return refused(() => (problem.textContent = "A name can't be empty. Type one, or press Escape to keep the old one."));
    }
    const result = await ImpoApi.call("PATCH", url, { title: input.value });
    if (!result.ok) return refused(() => ImpoUi.showError(problem, result.body));
    heading.textContent = result.body.title;
    document.title = result.body.title + SITE_SUFFIX;
    editing(false);
    open.focus();
    if (window.ImpoSidebar) window.ImpoSidebar.refresh();
  });
})();
