// The "thinking / doing" line above a reply while it runs: what the agent is doing now, in one line that opens to
// show its reasoning so far. It is transient: fed by `run.progress` events (reasoning summaries, in Markdown) and
// the reply's live state, it goes once reply text follows the latest progress or the run ends; it is never part
// of the reply's text. What it said stays as "Thought for N s" above the reply (reasoning.js).
(function () {
  "use strict";

  const TITLE_MAX = 80;

  // A message's progress: its reasoning steps in order, and the length its text had at the latest one.
  function empty() {
    return { steps: new Map(), textAt: 0, startedAt: null, lastAt: null, repliedAt: null };
  }

  // Reply text came at `at`: the thinking before it ends there.
  function replied(progress, at) {
    if (progress && progress.startedAt && !progress.repliedAt) progress.repliedAt = at;
  }

  // Folds one `run.progress` payload in: a running step's delta extends it, a completed one brings its whole text.
  // `at` (the event's time) times the thinking: from its first step to the reply's first words (`replied`).
  function take(progress, payload, textLength, at) {
    progress.startedAt = progress.startedAt || at;
    progress.lastAt = at;
    const step = progress.steps.get(payload.stepId) || { kind: payload.kind, text: "", done: false };
    step.text = payload.status === "completed" ? payload.text : step.text + payload.delta;
    step.done = payload.status === "completed";
    progress.steps.set(payload.stepId, step);
    progress.textAt = textLength;
    return progress;
  }

  // Reasoning summaries usually open with a bold title ("**Reading the message**"); otherwise their first line.
  function titleOf(text) {
    const bold = /^\s*\*\*(.+?)\*\*/.exec(text);
    // A title still streaming ("**Read") has no closing marks yet: Markdown's marks are never said.
    const line = (bold ? bold[1] : text.trim().split("\n")[0]).replace(/[*_`#]+/g, "").trim();
    return line.length > TITLE_MAX ? `${line.slice(0, TITLE_MAX - 1)}…` : line;
  }

  // The line's words: a wait or a running tool (what the agent does now) before its latest thought.
  function headline(progress, doing) {
    if (doing) return doing;
    const thoughts = [...progress.steps.values()].filter((step) => step.kind === "thinking" && step.text);
    if (!thoughts.length) return null;
    const title = titleOf(thoughts[thoughts.length - 1].text);
    return title ? `Thinking: ${title}` : "Thinking…";
  }

  // Draws the line into its <details> (kept open or closed as the reader left it); hidden when there is nothing
  // to say or the reply has replaced it.
  function draw(element, progress, { doing, visible }) {
    const words = visible ? headline(progress, doing) : null;
    element.hidden = !words;
    if (!words) return;
    const summary = element.querySelector("summary");
    if (summary.textContent !== words) summary.textContent = words;
    const reasoning = [...progress.steps.values()].map((step) => step.text).join("\n\n");
    const body = element.querySelector(".progress-detail");
    if (body.dataset.drawn !== reasoning) {
      body.replaceChildren(reasoning ? ImpoMarkdown.render(reasoning) : document.createTextNode(""));
      body.dataset.drawn = reasoning;
    }
    element.classList.toggle("has-reasoning", Boolean(reasoning));
  }

  function element() {
    const details = document.createElement("details");
    details.className = "progress-line";
    details.hidden = true;
    const summary = document.createElement("summary");
    const body = document.createElement("div");
    body.className = "progress-detail markdown";
    details.append(summary, body);
    return details;
  }

  window.ImpoProgress = { empty, take, replied, titleOf, draw, element };
})();
