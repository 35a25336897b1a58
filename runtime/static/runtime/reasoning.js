// "Thought for N s": the agent's reasoning kept above its reply, closed, once the reply's first words came. Live, it
// is what the run's progress said (timed from its first step to the reply's first words); once the run ended, and
// after a reload, it is what the server kept on the message (`reasoning: {text, seconds}`, docs/api.md).
(function () {
  "use strict";

  // What the reply shows of its reasoning, or null: the kept one, else the live steps once reply text follows them.
  function shown(message, progress) {
    if (message.reasoning && message.reasoning.text) return message.reasoning;
    if (!progress || !message.text || !progress.startedAt) return null;
    const text = [...progress.steps.values()]
      .filter((step) => step.kind === "thinking" && step.text.trim())
      .map((step) => step.text.trim())
      .join("\n\n");
    if (!text) return null;
    const until = progress.repliedAt || progress.lastAt;
    return { text, seconds: Math.max(1, Math.ceil((Date.parse(until) - Date.parse(progress.startedAt)) / 1000)) };
  }

  function draw(element, message, progress) {
    const reasoning = shown(message, progress);
    element.hidden = !reasoning;
    if (!reasoning) return;
    const words = `Thought for ${reasoning.seconds} s`;
    const summary = element.querySelector("summary");
    if (summary.textContent !== words) summary.textContent = words;
    const body = element.querySelector(".reasoning-text");
    if (body.dataset.drawn !== reasoning.text) {
      body.replaceChildren(ImpoMarkdown.render(reasoning.text));
      body.dataset.drawn = reasoning.text;
    }
  }

  function element() {
    const details = document.createElement("details");
    details.className = "reasoning";
    details.hidden = true;
    const summary = document.createElement("summary");
    const body = document.createElement("div");
    body.className = "reasoning-text markdown";
    details.append(summary, body);
    return details;
  }

  window.ImpoReasoning = { element, draw };
})();
