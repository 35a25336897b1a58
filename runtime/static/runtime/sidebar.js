// The sidebar (a drawer on a phone): "New task", a search box, the chats (Main Chat and every Task, named as one)
// newest activity first with a task's state (running, needs approval, failed…) and age, Schedules.
//
// The list comes from GET /api/v1/conversations (with `query` while searching, paged by "Show more"). Each
// unfinished task's conversation is watched on its own websocket (from its `lastEventSeq`, so nothing is
// replayed): a run's start or end there re-reads the list, so a badge changes as the task does, without a
// reload. A chat started elsewhere (a schedule, the chat's task tool) shows up when the page is shown again, or
// at the next minute.
(function () {
  "use strict";

  const sidebar = document.getElementById("sidebar");
  if (!sidebar) return;
  const list = document.getElementById("side-chats");
  const empty = document.getElementById("side-chats-empty");
  const search = document.getElementById("side-search");
  const more = document.getElementById("side-more");
  const menu = document.getElementById("menu-toggle");
  const backdrop = document.getElementById("sidebar-backdrop");
  const currentConversation = sidebar.dataset.currentConversation;
  const PAGE = 30;
  const SEARCH_PAUSE_MS = 250; // typing pauses this long before the search is asked
  const WATCHED_MAX = 8; // sockets are counted per user (IMPO_LIMIT_WEBSOCKETS); the chat needs its own
  const UNFINISHED = new Set(["queued", "in_progress"]);
  // A task's state in the words a person acts on: whether it still runs, needs their answer, or failed.
  const STATUS_WORDS = {
    queued: "Running",
    in_progress: "Running",
    completed: "Done",
    failed: "Failed",
    cancelled: "Stopped",
  };
  const RUN_EVENTS = new Set([
    "submission.accepted",
    "run.started",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "tool.approval_requested",
    "tool.approval_decided",
  ]);
  const watched = new Map(); // conversationId -> WebSocket
  let shown = []; // the chats listed, in order
  let nextOffset = null;
  let refreshing = null;
  let searchTimer = null;
  let asked = 0; // answers to older questions (a search typed over) are dropped

  function chatUrl(chat) {
    return chat.taskId ? `/tasks/${chat.taskId}/` : "/";
  }

  function chatItem(chat) {
    const item = document.createElement("li");
    item.dataset.conversationId = chat.conversationId;
    if (chat.taskId) item.dataset.taskId = chat.taskId;
    const link = document.createElement("a");
    link.href = chatUrl(chat);
    link.className = "side-task";
    if (chat.conversationId === currentConversation) link.setAttribute("aria-current", "page");
    const title = document.createElement("span");
    title.className = "side-task-title";
    title.textContent = chat.title;
    const meta = document.createElement("span");
    meta.className = "side-task-meta";
    if (chat.taskId) {
      // Named as what it is: a Task, not Main Chat (screen readers hear it before the title too).
      const kind = document.createElement("span");
      kind.className = "side-kind";
      kind.textContent = "Task";
      meta.append(kind);
    }
    if (chat.taskId && chat.status) {
      const asks = chat.runState === "waiting_approval";
      const badge = document.createElement("span");
      badge.className = `status status-${asks ? "waiting_approval" : chat.status}`;
      badge.dataset.status = chat.status;
      badge.textContent = asks ? "Needs approval" : STATUS_WORDS[chat.status] || chat.status;
      meta.append(badge);
    }
    meta.append(ImpoUi.timeElement(chat.lastActivityAt));
    link.append(title, meta);
    item.append(link);
    if (chat.taskId) item.append(deleteButton(chat));
    return item;
  }

  // A Task's Delete, once confirmed: DELETE /api/v1/tasks/<id>. Deleting the chat on screen goes to Main Chat.
  function deleteButton(chat) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "link side-delete";
    button.textContent = "Delete";
    button.setAttribute("aria-label", `Delete “${chat.title}”`);
    button.addEventListener("click", async () => {
      if (!confirm(`Delete “${chat.title}”? Its messages are deleted for good, here and at the assistant.`)) return;
      const result = await ImpoApi.call("DELETE", `/api/v1/tasks/${chat.taskId}`);
      if (!result.ok && result.status !== 404) {
        empty.textContent = (result.body && result.body.error && result.body.error.message) || "Could not delete.";
        empty.hidden = false;
        return;
      }
      if (chat.conversationId === currentConversation) location.assign("/");
      else refreshSoon();
    });
    return button;
  }

  function draw() {
    list.replaceChildren(...shown.map(chatItem));
    const query = search.value.trim();
    empty.textContent = shown.length ? "" : query ? `No chats match “${query}”.` : "No chats yet.";
    empty.hidden = shown.length > 0;
    more.hidden = nextOffset === null;
  }

  async function page(offset, size) {
    const query = search.value.trim();
    const params = new URLSearchParams({ offset: String(offset), limit: String(size) });
    if (query) params.set("query", query);
    return ImpoApi.call("GET", `/api/v1/conversations?${params}`);
  }

  // Reads the list again as far as it is shown (at least a page), keeping "Show more"'s place.
  async function refresh() {
    const question = ++asked;
    const result = await page(0, Math.max(PAGE, shown.length));
    if (!result.ok || question !== asked) return;
    shown = result.body.conversations;
    nextOffset = result.body.nextOffset;
    draw();
    watch(shown.filter((chat) => chat.taskId && UNFINISHED.has(chat.status)).slice(0, WATCHED_MAX));
  }

  async function showMore() {
    const question = ++asked;
    const result = await page(nextOffset, PAGE);
    if (!result.ok || question !== asked) return;
    const known = new Set(shown.map((chat) => chat.conversationId));
    shown = shown.concat(result.body.conversations.filter((chat) => !known.has(chat.conversationId)));
    nextOffset = result.body.nextOffset;
    draw();
  }

  // Many events in a burst (a reply's start and end) read the list once, and once more after a read already under
  // way when one came: that read may have been answered before the event's change (a reply's end lost).
  let readAgain = false;
  function refreshSoon() {
    if (refreshing) {
      readAgain = true;
      return refreshing;
    }
    refreshing = Promise.resolve()
      .then(() => refresh())
      .finally(() => {
        refreshing = null;
        if (readAgain) {
          readAgain = false;
          refreshSoon();
        }
      });
    return refreshing;
  }

  function watch(chats) {
    const wanted = new Set(chats.map((chat) => chat.conversationId));
    for (const [conversationId, socket] of watched) {
      if (!wanted.has(conversationId)) {
        watched.delete(conversationId);
        if (socket) socket.close();
      }
    }
    for (const chat of chats) if (!watched.has(chat.conversationId)) follow(chat);
  }

  async function follow(chat) {
    const key = chat.conversationId;
    watched.set(key, null);
    const history = await ImpoApi.call("GET", `/api/v1/tasks/${chat.taskId}/conversation?limit=1`);
    if (!history.ok || !watched.has(key)) return watched.delete(key);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const socket = new WebSocket(`${scheme}://${location.host}/ws/v1/conversations/${key}/?after=${history.body.lastEventSeq}`);
    watched.set(key, socket);
    // The socket brings only what comes after that seq; a run that ended between the list's read and the history's
    // is already past it, and the list shown predates its end: read the list once more.
    refreshSoon();
    socket.addEventListener("message", (message) => {
      if (RUN_EVENTS.has(JSON.parse(message.data).type)) refreshSoon();
    });
    socket.addEventListener("close", () => {
      if (watched.get(key) !== socket) return;
      // Closed under us (a restart, the network): the list is read again and the task watched anew.
      watched.delete(key);
      setTimeout(refreshSoon, 2000);
    });
  }

  search.form.addEventListener("submit", (event) => {
    event.preventDefault();
    clearTimeout(searchTimer);
    shown = [];
    refresh();
  });
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      shown = [];
      refresh();
    }, SEARCH_PAUSE_MS);
  });
  more.addEventListener("click", showMore);

  // --- the drawer (narrow screens) -----------------------------------------------------------------------
  function setDrawer(open) {
    document.body.classList.toggle("drawer-open", open);
    menu.setAttribute("aria-expanded", String(open));
    backdrop.hidden = !open;
    if (open) sidebar.querySelector("a").focus();
  }

  menu.addEventListener("click", () => setDrawer(!document.body.classList.contains("drawer-open")));
  backdrop.addEventListener("click", () => setDrawer(false));
  document.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !document.body.classList.contains("drawer-open")) return;
    if (event.target === search && search.value) return; // Escape in the search box clears it first
    setDrawer(false);
    menu.focus();
  });

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refreshSoon();
  });
  setInterval(refreshSoon, 60_000);
  refresh();

  window.ImpoSidebar = { refresh: refreshSoon };
})();
