// The account page's custom instructions: read from GET /api/v1/account/instructions into the textarea, saved with
// PUT (the text, trimmed by the server). A count of characters against the server's maxLength; Save is off while the
// text is over it or unchanged. The server's answer is what the page then shows, and it says the change applies
// from the next message (a reply under way keeps the instructions it started with).
(function () {
  "use strict";

  const form = document.getElementById("instructions-form");
  if (!form) return;
  const URL = "/api/v1/account/instructions";
  const text = document.getElementById("instructions-text");
  const count = document.getElementById("instructions-count");
  const status = document.getElementById("instructions-status");
  const problem = document.getElementById("instructions-error");
  const save = form.querySelector("button[type=submit]");
  const numbers = new Intl.NumberFormat();
  let saved = "";
  let maxLength = 0;

  function refresh() {
    const length = text.value.trim().length;
    const over = length - maxLength;
    count.textContent =
      over > 0
        ? `${numbers.format(length)} / ${numbers.format(maxLength)} characters: ${numbers.format(over)} too many`
        : `${numbers.format(length)} / ${numbers.format(maxLength)} characters`;
    if (over > 0) text.setAttribute("aria-invalid", "true");
    else text.removeAttribute("aria-invalid");
    save.disabled = over > 0 || text.value.trim() === saved;
  }

  // The server's answer, shown unless the text was changed while it was asked (typing is never overwritten).
  function show(answer, asked) {
    saved = answer.text;
    maxLength = answer.maxLength;
    if (text.value === asked) text.value = answer.text;
    text.disabled = false;
    refresh();
  }

  async function load() {
    const result = await ImpoApi.call("GET", URL);
    if (!result.ok) return ImpoUi.showError(problem, result.body);
    show(result.body, text.value);
  }

  text.addEventListener("input", () => {
    status.textContent = "";
    refresh();
  });

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    problem.hidden = true;
    save.disabled = true;
    const asked = text.value;
    const result = await ImpoApi.call("PUT", URL, { text: asked });
    if (!result.ok) {
      ImpoUi.showError(problem, result.body);
      refresh();
      return;
    }
    show(result.body, asked);
    status.textContent = result.body.text
      ? "Saved. They apply from your next message."
      : "Saved: no instructions. This applies from your next message.";
  });

  load();
})();
