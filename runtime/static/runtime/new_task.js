// A new Task, started from an empty composer (templates/chat/new_task.html): the first message is the task's goal,
// posted to POST /api/v1/tasks, and the page becomes the task's own (/tasks/<id>/), where its reply runs.
//
// A start that failed for lack of a connection is retried under its first clientMessageId, so a second try never
// starts the task twice; text changed since then makes it a new command.
(function () {
  "use strict";

  const form = document.getElementById("composer");
  const textarea = document.getElementById("message-text");
  const error = document.getElementById("task-error");
  const button = document.getElementById("send");
  let failed = null;

  // Enter starts it as Enter sends in a chat (Shift+Enter, or Return on a touch screen, breaks the line).
  textarea.addEventListener("keydown", (event) => {
    if (!ImpoUi.enterSends(event)) return;
    event.preventDefault();
    form.requestSubmit();
  });
  textarea.addEventListener("input", () => {
    textarea.style.height = "auto";
    textarea.style.height = `${Math.min(textarea.scrollHeight + 2, window.innerHeight / 3)}px`;
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = textarea.value;
    error.hidden = true;
    textarea.removeAttribute("aria-invalid");
    if (!text.trim()) {
      error.textContent = "Describe the task first: what should the assistant do?";
      error.hidden = false;
      textarea.setAttribute("aria-invalid", "true");
      textarea.focus();
      return;
    }
    if (failed && failed.body.text !== text) ImpoApi.forget(failed);
    const command = failed && failed.body.text === text ? failed : ImpoApi.command("/api/v1/tasks", { text });
    button.disabled = true;
    const result = await ImpoApi.post(command);
    failed = !result.ok && ImpoApi.isRetryable(result) ? command : null;
    if (result.ok) {
      window.location.replace(`/tasks/${result.body.taskId}/`); // Back leads where the person came from
      return;
    }
    button.disabled = false;
    ImpoUi.showError(error, result.body);
    textarea.setAttribute("aria-invalid", "true");
  });
})();
