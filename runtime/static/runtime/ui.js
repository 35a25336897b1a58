// What every page shares: words for error codes, times people read, copy buttons and the colour theme.
//
// Codes stay in the API; a person reads a sentence that says what happened and what to do, and can open
// "Details" for the code and the server's message (what support asks for). One table, used by the chat,
// the tasks and the schedules pages.
(function () {
  "use strict";

  const ERROR_WORDS = {
    network: "You seem to be offline. It will be sent when the connection returns.",
    bad_response: "The server answered with something unexpected. Try again in a moment.",
    service_unavailable: "The server could not save this just now. Try again in a moment.",
    rate_limited: "That was a lot at once. Wait a moment, then try again.",
    unauthorized: "You were logged out. Log in again to go on.",
    not_found: "This is gone, or it belongs to another account. Reload the page.",
    invalid_request: "Something in the form needs fixing; see the marked fields.",
    request_too_large: "That is too long to send. Shorten it and try again.",
    invalid_attachments: "A file of this message is no longer there. Attach it again, then send.",
    upload_incomplete: "A file of this message has not finished uploading. Attach it again, then send.",
    idempotency_conflict: "This was already sent with different content. Reload the page and send it again.",
    run_in_progress: "A reply is still running. Wait for it, or stop it, then send.",
    not_retryable: "This reply can no longer be tried again. Reload the page to see where it stands.",
    approval_conflict: "This was already answered, maybe on another device.",
    approval_expired: "Too late: nobody answered in time, so it was denied.",
    approval_cancelled: "The reply was stopped, so there is nothing to answer.",
    schedule_changed: "The schedule was changed elsewhere. The list is fresh again: make your change once more.",
    schedule_deleted: "The schedule was deleted elsewhere.",
    schedule_limit_reached: "You have as many schedules as allowed. Delete one to add another.",
    schedule_in_past: "That time has passed. Pick a time in the future.",
    invalid_task_schedule: "The schedule needs fixing; see the marked field.",
    device_timeout: "Your device did not answer in time. Keep this page open and try again.",
    no_device: "No device of yours can do this. Open the chat on a device that can, then try again.",
    approval_denied: "You denied it.",
    approval_timeout: "Nobody answered in time, so it was denied.",
    run_cancelled: "The reply was stopped before it was approved.",
    reconciled_failed: "Support checked: it did not happen.",
    reconciled_succeeded: "Support checked: it did happen.",
    pending_reconciliation:
      "The provider did not answer clearly. Impo checks again on its own once it answers; nothing to do for now.",
    needs_staff: "The provider's answer could not be confirmed, so a person will check it. Stop ends the reply meanwhile.",
  };
  const FALLBACK = "Something went wrong. Try again.";

  // How a reply ends badly (the run's error code: ours, or the provider's SessionTurnError code), told by kind:
  // refused, blocked, unreachable, timed out, or the agent's own failure. Whether to try again comes from the
  // error's `retryable`, never from the code alone: a retry that cannot help is not suggested.
  const REFUSED = "The assistant's service refused this request.";
  const LIMIT = "The assistant's usage limit is reached; support can raise it.";
  const UNREACHABLE = "The assistant could not be reached.";
  const BUSY = "The assistant's service is overloaded just now.";
  const RUN_ERROR_WORDS = {
    internal_error: "The assistant failed while answering.",
    turn_failed: "The assistant failed while answering.",
    provider_rejected: REFUSED,
    provider_error: REFUSED,
    invalid_request: REFUSED,
    resource_not_found: REFUSED,
    active_turn_not_steerable: REFUSED,
    executor_version_incompatible: REFUSED,
    authentication_error: "The assistant's service refused this server's credentials; support has to fix them.",
    context_length_exceeded: "This conversation is too long for the assistant. Start a new chat.",
    max_output_tokens: "The reply grew longer than the assistant may write. Ask for less at a time.",
    session_budget_exceeded: LIMIT,
    usage_limit_exceeded: LIMIT,
    project_spend_limit_exceeded: LIMIT,
    organization_spend_limit_exceeded: LIMIT,
    organization_usage_limit_exceeded: LIMIT,
    billing_not_active: LIMIT,
    credit_balance_exhausted: LIMIT,
    cyber_policy: "The assistant's safety rules blocked this request.",
    misalignment_policy_violation: "The assistant's safety rules blocked this request.",
    rate_limit_exceeded: "The assistant's service had too many requests just now.",
    server_overloaded: BUSY,
    flex_unavailable: BUSY,
    connection_failed: UNREACHABLE,
    server_error: UNREACHABLE,
    provider_unavailable: UNREACHABLE,
    max_attempts_exceeded: UNREACHABLE,
    request_timeout: "The assistant took too long to answer.",
    sandbox_error: "The assistant's workspace failed.",
    failed_by_staff: "Support stopped this reply.",
  };
  const RETRY_WORDS = { failed_by_staff: "Try again, or ask them why." };

  // An answer's error: a form's, a command's.
  function sentenceFor(error) {
    return (error && ERROR_WORDS[error.code]) || FALLBACK;
  }

  // A reply's error (its run's): the provider's codes share names with answers' (`invalid_request` is a refused
  // turn there, a form to fix here), so the two are told apart by where the error comes from.
  function runSentenceFor(error) {
    if (error && RUN_ERROR_WORDS[error.code] !== undefined) {
      const advice = error.retryable ? ` ${RETRY_WORDS[error.code] || "Try again."}` : "";
      return RUN_ERROR_WORDS[error.code] + advice;
    }
    return sentenceFor(error);
  }

  // `error` is an ICA error object ({code, message}); the element gets the sentence (or `words`, when what failed
  // already wrote them for a person, as a tool or a device does) and a Details toggle with the code.
  function describeError(element, error, words) {
    const sentence = document.createElement("span");
    sentence.className = "error-sentence";
    sentence.textContent = words || sentenceFor(error);
    const parts = [sentence];
    if (error && (error.code || error.message)) {
      const details = document.createElement("details");
      details.className = "error-details";
      const summary = document.createElement("summary");
      summary.textContent = "Details";
      const body = document.createElement("div");
      body.className = "error-details-body";
      const code = document.createElement("code");
      code.textContent = [error.code, error.message].filter(Boolean).join(": ");
      body.append(code, copyButton("Copy the details", () => code.textContent));
      details.append(summary, body);
      parts.push(details);
    }
    element.replaceChildren(...parts);
  }

  function showError(element, body) {
    describeError(element, (body && body.error) || null);
    element.hidden = false;
  }

  // --- time --------------------------------------------------------------------------------------------
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
  const exact = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  const STEPS = [
    [60, "second"],
    [60, "minute"],
    [24, "hour"],
    [7, "day"],
    [4.345, "week"],
    [12, "month"],
    [Infinity, "year"],
  ];

  function relativeTime(iso, now = Date.now()) {
    let amount = (new Date(iso).getTime() - now) / 1000;
    if (Math.abs(amount) < 45) return "just now";
    for (const [size, unit] of STEPS) {
      if (Math.abs(amount) < size) return relative.format(Math.round(amount), unit);
      amount /= size;
    }
    return exact.format(new Date(iso));
  }

  // A <time> saying "5 minutes ago", the exact time (in the browser's zone) on hover.
  function timeElement(iso, className = "when") {
    const element = document.createElement("time");
    element.className = className;
    element.dateTime = iso;
    drawTime(element);
    return element;
  }

  function drawTime(element) {
    const when = new Date(element.dateTime);
    element.textContent = relativeTime(element.dateTime);
    element.title = exact.format(when);
  }

  // Relative times age: every <time class="when"> on the page (the server's too) is redrawn each half minute.
  document.querySelectorAll("time.when").forEach(drawTime);
  setInterval(() => document.querySelectorAll("time.when").forEach(drawTime), 30_000);

  // --- copy ----------------------------------------------------------------------------------------------
  // --- icons -------------------------------------------------------------------------------------------
  // A message's actions are small icons; each button carries its name for screen readers (aria-label) and a
  // tooltip (title), the drawing itself hidden from them.
  const ICONS = {
    copy: ['<rect x="9" y="9" width="11" height="11" rx="2"/>', '<path d="M5 15V6a2 2 0 0 1 2-2h9"/>'],
    check: ['<path d="M5 12.5l4.5 4.5L19 7"/>'],
    edit: ['<path d="M4 20h4L19 9l-4-4L4 16z"/>', '<path d="M13.5 6.5l4 4"/>'],
    regenerate: ['<path d="M20 12a8 8 0 1 1-2.35-5.65"/>', '<path d="M20 4v5h-5"/>'],
    thumbUp: ['<path d="M7 11v9H4v-9z"/>', '<path d="M7 11l4-7.5a2 2 0 0 1 3.3 1.8L13.5 10h5.3a2 2 0 0 1 2 2.4l-1.3 6A2 2 0 0 1 17.5 20H7"/>'],
  };
  ICONS.thumbDown = [`<g transform="rotate(180 12 12)">${ICONS.thumbUp.join("")}</g>`];

  function icon(name) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    svg.classList.add("icon");
    svg.innerHTML = ICONS[name].join("");
    return svg;
  }

  // `tip` is the short word shown on hover ("Copy"); `label` the name read out ("Copy reply").
  function iconButton(name, tip, className, onClick, label) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `icon-button ${className}`;
    button.title = tip;
    button.setAttribute("aria-label", label || tip);
    button.append(icon(name));
    button.addEventListener("click", onClick);
    return button;
  }

  // Copy: the word on a code block or an error's details; the icon (a tick once copied) among a message's actions.
  function copyButton(label, textOf, { asIcon = false } = {}) {
    const button = asIcon ? iconButton("copy", "Copy", "copy", () => {}, label) : document.createElement("button");
    button.type = "button";
    if (!asIcon) {
      button.className = "copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", label);
    }
    const show = (word, drawing) => {
      if (!asIcon) button.textContent = word;
      else {
        button.title = word;
        button.replaceChildren(icon(drawing));
      }
    };
    button.addEventListener("click", async () => {
      let copied = true;
      try {
        await navigator.clipboard.writeText(textOf());
      } catch (error) {
        copied = false;
      }
      show(copied ? "Copied" : "Copy failed", copied ? "check" : "copy");
      button.dataset.copied = copied ? "yes" : "no";
      setTimeout(() => {
        show("Copy", "copy");
        delete button.dataset.copied;
      }, 2000);
    });
    return button;
  }

  // --- theme ---------------------------------------------------------------------------------------------
  // `prefers-color-scheme` until the person picks one; the pick is remembered by this browser.
  const THEME_KEY = "impo.theme";
  const darkQuery = window.matchMedia("(prefers-color-scheme: dark)");

  function chosenTheme() {
    const saved = localStorage.getItem(THEME_KEY);
    return saved === "dark" || saved === "light" ? saved : null;
  }

  function applyTheme() {
    const theme = chosenTheme() || (darkQuery.matches ? "dark" : "light");
    document.documentElement.dataset.theme = theme;
    const toggle = document.getElementById("theme-toggle");
    if (toggle) {
      toggle.setAttribute("aria-pressed", String(theme === "dark"));
    }
  }

  darkQuery.addEventListener("change", applyTheme);
  const toggle = document.getElementById("theme-toggle");
  if (toggle) {
    toggle.addEventListener("click", () => {
      localStorage.setItem(THEME_KEY, document.documentElement.dataset.theme === "dark" ? "light" : "dark");
      applyTheme();
    });
  }
  applyTheme();

  // --- the Enter key in a composer -------------------------------------------------------------------------
  // With a keyboard, Enter sends and Shift+Enter breaks the line. On a touch screen the keyboard's Return is the
  // only way to a new line, so it keeps doing that and the Send button sends.
  const touchOnly = window.matchMedia("(pointer: coarse)");

  function isTouchOnly() {
    return touchOnly.matches;
  }

  function enterSends(event) {
    return event.key === "Enter" && !event.shiftKey && !event.isComposing && !isTouchOnly();
  }

  window.ImpoUi = { enterSends, isTouchOnly, sentenceFor, runSentenceFor, describeError, showError, relativeTime, timeElement, copyButton, icon, iconButton };
})();
