// Files for the next message (docs/design.md §12): picked with the Attach button, dropped on the composer or pasted
// into it. Each is checked against the server's limits (`GET /api/v1/attachments`) before anything is sent, then
// uploaded in the steps of docs/api.md "Attachments": its id (the client's UUID) kept first, its SHA-256, prepare,
// PUT (with a progress bar), complete. An upload cut off is prepared again with the same id, which the server
// answers with a new URL or "ready": a file is never stored twice. Until the message goes, each file is a preview
// with a Remove button; chat.js takes the ready files' ids with the message and keeps Send off while one uploads.
(function () {
  "use strict";

  const { humanSize, isImage, fileChip } = window.ImpoChatFiles;
  const attachButton = document.getElementById("attach");
  const input = document.getElementById("attach-input");
  const tray = document.getElementById("attach-list");
  const refusalBox = document.getElementById("attach-error");
  const dropZone = document.querySelector(".composer-area");
  const textarea = document.getElementById("message-text");
  const RETRIES = 4;
  const RETRY_FIRST_MS = 500;
  const entries = []; // the files in the composer, in the order added
  let limits = null;

  // The server's refusals, said as what happened and what to do; never a code.
  const REFUSAL_WORDS = {
    unsupported_file_type: "Impo can't open this kind of file.",
    attachment_quota_exceeded: "Your files use all the room you have. Delete chats with files you no longer need.",
    attachment_unreadable: "Impo couldn't read this file: it may be damaged, or not the kind of file its name says.",
    attachment_conflict: "This file changed while it was uploading. Remove it and add it again.",
    upload_incomplete: "The upload didn't finish. Try again.",
    invalid_upload: "This file couldn't be uploaded. Remove it and add it again.",
  };
  const CUT_OFF = "The upload was cut off. Check your connection, then try again.";

  async function loadLimits() {
    if (limits) return limits;
    const result = await ImpoApi.call("GET", "/api/v1/attachments");
    if (result.ok) {
      limits = result.body;
      input.accept = Object.keys(limits.formats).map((extension) => `.${extension}`).join(",");
    }
    return limits;
  }

  function extensionOf(name) {
    return name.includes(".") ? name.split(".").pop().toLowerCase() : "";
  }

  // Why a file cannot go, in plain words, or null: what the server would refuse, said before any byte is sent.
  function refusalOf(file, mediaType) {
    if (!mediaType) return "Impo can't open this kind of file.";
    if (file.size > limits.maxBytes) return `This file is larger than ${humanSize(limits.maxBytes)}.`;
    if (file.size === 0) return "This file is empty.";
    return null;
  }

  function wordsFor(result) {
    const code = result.body && result.body.error && result.body.error.code;
    if (REFUSAL_WORDS[code]) return REFUSAL_WORDS[code];
    if (result.status === 413) return `This file is larger than ${humanSize(limits.maxBytes)}.`;
    if (result.status === 0) return CUT_OFF;
    return "This file couldn't be uploaded just now. Try again in a moment.";
  }

  function showRefusals(problems) {
    refusalBox.textContent = problems.join(" ");
    refusalBox.hidden = problems.length === 0;
  }

  async function add(files) {
    if (!files.length) return;
    if (!window.crypto || !crypto.subtle) {
      return showRefusals(["Attaching files needs a secure (https) connection to Impo."]);
    }
    if (!(await loadLimits())) return showRefusals(["Files can't be attached just now. Try again in a moment."]);
    const problems = [];
    for (const file of files) {
      const mediaType = limits.formats[extensionOf(file.name)];
      const problem = refusalOf(file, mediaType);
      if (problem) {
        problems.push(`${file.name}: ${problem}`);
      } else if (entries.length >= limits.maxFiles) {
        problems.push(`One message takes at most ${limits.maxFiles} files.`);
        break;
      } else {
        // The id is kept before the first request: every retry of this file prepares the same one.
        const entry = { id: ImpoApi.newId(), file, name: file.name, mediaType, sizeBytes: file.size, loaded: 0 };
        entries.push(entry);
        tray.append(itemFor(entry));
        upload(entry);
      }
    }
    showRefusals(problems);
    changed();
  }

  async function upload(entry) {
    entry.state = "uploading";
    entry.problem = null;
    entry.loaded = 0;
    draw(entry);
    changed();
    let outcome;
    try {
      entry.sha256 = entry.sha256 || (await sha256Of(entry.file));
      for (let attempt = 0; ; attempt += 1) {
        outcome = await uploadOnce(entry);
        if (outcome.done || !outcome.retry || attempt >= RETRIES || entry.removed) break;
        await new Promise((resolve) => setTimeout(resolve, RETRY_FIRST_MS * 2 ** attempt));
      }
    } catch (error) {
      outcome = { problem: "This file couldn't be read. Add it again." }; // moved or deleted since it was picked
    }
    if (entry.removed) return;
    entry.state = outcome.done ? "ready" : "failed";
    entry.problem = outcome.done ? null : outcome.problem;
    entry.retryable = Boolean(outcome.retry);
    draw(entry);
    changed();
  }

  async function sha256Of(file) {
    const digest = await crypto.subtle.digest("SHA-256", await file.arrayBuffer());
    return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
  }

  async function uploadOnce(entry) {
    const manifest = { id: entry.id, name: entry.name, mediaType: entry.mediaType, sizeBytes: entry.sizeBytes, sha256: entry.sha256 };
    const prepared = await ImpoApi.call("POST", "/api/v1/attachments/prepare", manifest);
    if (!prepared.ok) return refused(prepared);
    if (prepared.body.status === "ready") return { done: true }; // stored already: an earlier try got that far
    if (entry.removed) return { done: false };
    const put = await putBytes(entry, prepared.body.upload);
    if (entry.removed) return { done: false };
    if (!put.ok) return refused(put);
    const completed = await ImpoApi.call("POST", `/api/v1/attachments/${entry.id}/complete`, {});
    return completed.ok ? { done: true } : refused(completed);
  }

  function refused(result) {
    return { retry: result.status === 408 || Boolean(ImpoApi.isRetryable(result)), problem: wordsFor(result) };
  }

  // XMLHttpRequest, not fetch: only it reports an upload's progress. The URL may be the store's own (S3), so it
  // carries exactly the headers prepare gave, and no cookie-bound token.
  function putBytes(entry, upload) {
    return new Promise((resolve) => {
      const request = new XMLHttpRequest();
      entry.request = request;
      request.open(upload.method || "PUT", upload.url);
      for (const [name, value] of Object.entries(upload.headers || {})) request.setRequestHeader(name, value);
      request.upload.addEventListener("progress", (event) => {
        entry.loaded = event.loaded;
        drawProgress(entry);
      });
      const cutOff = () => resolve({ ok: false, status: 0, body: null });
      request.addEventListener("error", cutOff);
      request.addEventListener("abort", cutOff);
      request.addEventListener("timeout", cutOff);
      request.addEventListener("load", () => {
        let body = null;
        try {
          body = request.responseText ? JSON.parse(request.responseText) : null;
        } catch (error) {
          body = null; // a store's XML answer: its status says enough
        }
        resolve({ ok: request.status >= 200 && request.status < 300, status: request.status, body });
      });
      request.send(entry.file);
    });
  }

  function itemFor(entry) {
    const item = document.createElement("li");
    item.className = "attach-item";
    if (isImage(entry.mediaType)) {
      entry.previewUrl = URL.createObjectURL(entry.file);
      const thumb = document.createElement("img");
      thumb.className = "attach-thumb";
      thumb.src = entry.previewUrl;
      thumb.alt = ""; // the chip below names it
      item.append(thumb);
    }
    item.append(fileChip(entry.name, humanSize(entry.sizeBytes)));
    const bar = document.createElement("div");
    bar.className = "attach-progress";
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    bar.setAttribute("aria-label", `Uploading ${entry.name}`);
    bar.append(document.createElement("span"));
    const status = document.createElement("p");
    status.className = "attach-status";
    const actions = document.createElement("div");
    actions.className = "attach-actions";
    const retry = control("Try again", `Try uploading ${entry.name} again`, () => upload(entry));
    retry.classList.add("attach-retry");
    const remove = control("Remove", `Remove ${entry.name}`, () => removeEntry(entry));
    remove.classList.add("attach-remove");
    actions.append(retry, remove);
    item.append(bar, status, actions);
    entry.item = item;
    entry.parts = { bar, status, retry };
    return item;
  }

  function control(label, name, onClick) {
    const element = document.createElement("button");
    element.type = "button";
    element.className = "link";
    element.textContent = label;
    element.setAttribute("aria-label", name);
    element.addEventListener("click", onClick);
    return element;
  }

  function draw(entry) {
    const { bar, status, retry } = entry.parts;
    entry.item.dataset.state = entry.state;
    bar.hidden = entry.state !== "uploading";
    retry.hidden = !(entry.state === "failed" && entry.retryable);
    status.classList.toggle("error", entry.state === "failed");
    if (entry.state === "failed") status.textContent = entry.problem;
    else if (entry.state === "ready") status.textContent = "Ready to send";
    drawProgress(entry);
  }

  function drawProgress(entry) {
    if (entry.state !== "uploading") return;
    const percent = Math.min(100, Math.floor((100 * entry.loaded) / Math.max(entry.sizeBytes, 1)));
    entry.parts.bar.setAttribute("aria-valuenow", String(percent));
    entry.parts.bar.firstChild.style.width = `${percent}%`;
    entry.parts.status.textContent = `Uploading… ${percent}%`;
  }

  function removeEntry(entry) {
    entry.removed = true;
    if (entry.request) entry.request.abort();
    // The server's copy goes too; one that was never sent would be swept later anyway.
    if (entry.state === "ready") ImpoApi.call("DELETE", `/api/v1/attachments/${entry.id}`);
    forget([entry]);
    changed();
    textarea.focus();
  }

  function forget(gone) {
    for (const entry of gone) {
      entries.splice(entries.indexOf(entry), 1);
      entry.item.remove();
      if (entry.previewUrl) URL.revokeObjectURL(entry.previewUrl);
    }
  }

  function changed() {
    tray.hidden = entries.length === 0;
    if (window.ImpoChatMessages) window.ImpoChatMessages.drawChrome();
  }

  // The files' ids, in the order added, for the message now being sent; the files leave the composer with it.
  function take() {
    const ids = entries.map((entry) => entry.id);
    forget([...entries]);
    showRefusals([]);
    changed();
    return ids;
  }

  attachButton.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    add([...input.files]);
    input.value = ""; // the same file picked again is a change again
  });
  // A pasted image (a screenshot) is attached; pasted text stays text.
  textarea.addEventListener("paste", (event) => {
    const data = event.clipboardData;
    if (!data || !data.files.length) return;
    if (!data.types.includes("text/plain")) event.preventDefault();
    add([...data.files]);
  });
  const carriesFiles = (event) => event.dataTransfer && [...event.dataTransfer.types].includes("Files");
  dropZone.addEventListener("dragover", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dropZone.classList.add("is-dropping");
  });
  dropZone.addEventListener("dragleave", (event) => {
    if (!dropZone.contains(event.relatedTarget)) dropZone.classList.remove("is-dropping");
  });
  dropZone.addEventListener("drop", (event) => {
    if (!carriesFiles(event)) return;
    event.preventDefault();
    dropZone.classList.remove("is-dropping");
    add([...event.dataTransfer.files]);
  });
  loadLimits();

  window.ImpoAttachments = {
    count: () => entries.length,
    ready: () => entries.every((entry) => entry.state === "ready"),
    take,
  };
})();
