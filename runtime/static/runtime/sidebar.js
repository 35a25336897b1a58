// The sidebar (a drawer on a phone): Main Chat, the tasks newest first with their status and age, Schedules.
//
// The list comes from GET /api/v1/tasks. Each unfinished task's conversation is watched on its own websocket
// (from its `lastEventSeq`, so nothing is replayed): a run's start or end there re-reads the list, so a badge
// changes as the task does, without a reload. A task started elsewhere (a schedule, the chat's task tool) shows
// up when the page is shown again, or at the next minute.
(function () {
  "use strict";

  const sidebar = document.getElementById("sidebar");
  if (!sidebar) return;
  const list = document.getElementById("side-tasks");
  const empty = document.getElementById("side-tasks-empty");
  const menu = document.getElementById("menu-toggle");
  const backdrop = document.getElementById("sidebar-backdrop");
  const currentTask = sidebar.dataset.currentTask;
  const WATCHED_MAX = 8; // sockets are counted per user (IMPO_LIMIT_WEBSOCKETS); the chat needs its own
  const UNFINISHED = new Set(["queued", "in_progress"]);
  const STATUS_WORDS = {
    queued: "Queued",
    in_progress: "In progress",
    completed: "Done",
    failed: "Failed",
    cancelled: "Stopped",
  };
  const RUN_EVENTS = new Set(["submission.accepted", "run.started", "run.completed", "run.failed", "run.cancelled"]);
  const watched = new Map(); // taskId -> WebSocket
  let refreshing = null;

  function taskItem(task) {
    const item = document.createElement("li");
    item.dataset.taskId = task.taskId;
    const link = document.createElement("a");
    link.href = `/tasks/${task.taskId}/`;
    link.className = "side-task";
    if (task.taskId === currentTask) link.setAttribute("aria-current", "page");
    const title = document.createElement("span");
    title.className = "side-task-title";
    title.textContent = task.title;
    const meta = document.createElement("span");
    meta.className = "side-task-meta";
    const badge = document.createElement("span");
    badge.className = `status status-${task.status}`;
    badge.dataset.status = task.status;
    badge.textContent = STATUS_WORDS[task.status] || task.status;
    meta.append(badge, ImpoUi.timeElement(task.updatedAt));
    link.append(title, meta);
    item.append(link);
    return item;
  }

  async function refresh() {
    const result = await ImpoApi.call("GET", "/api/v1/tasks");
    if (!result.ok) return;
    const tasks = result.body.tasks;
    list.replaceChildren(...tasks.map(taskItem));
    empty.hidden = tasks.length > 0;
    watch(tasks.filter((task) => UNFINISHED.has(task.status)).slice(0, WATCHED_MAX));
  }

  // Many events in a burst (a reply's start and end) read the list once.
  function refreshSoon() {
    if (!refreshing) refreshing = Promise.resolve().then(() => refresh()).finally(() => (refreshing = null));
    return refreshing;
  }

  function watch(tasks) {
    const wanted = new Set(tasks.map((task) => task.taskId));
    for (const [taskId, socket] of watched) {
      if (!wanted.has(taskId)) {
        watched.delete(taskId);
        socket.close();
      }
    }
    for (const task of tasks) if (!watched.has(task.taskId)) follow(task);
  }

  async function follow(task) {
    watched.set(task.taskId, null);
    const page = await ImpoApi.call("GET", `/api/v1/tasks/${task.taskId}/conversation?limit=1`);
    if (!page.ok || !watched.has(task.taskId)) return watched.delete(task.taskId);
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/ws/v1/conversations/${task.conversationId}/?after=${page.body.lastEventSeq}`;
    const socket = new WebSocket(url);
    watched.set(task.taskId, socket);
    socket.addEventListener("message", (message) => {
      if (RUN_EVENTS.has(JSON.parse(message.data).type)) refreshSoon();
    });
    socket.addEventListener("close", () => {
      if (watched.get(task.taskId) !== socket) return;
      // Closed under us (a restart, the network): the list is read again and the task watched anew.
      watched.delete(task.taskId);
      setTimeout(refreshSoon, 2000);
    });
  }

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
    if (event.key === "Escape" && document.body.classList.contains("drawer-open")) {
      setDrawer(false);
      menu.focus();
    }
  });

  document.addEventListener("visibilitychange", () => {
    if (document.visibilityState === "visible") refreshSoon();
  });
  setInterval(refreshSoon, 60_000);
  refresh();

  window.ImpoSidebar = { refresh: refreshSoon };
})();
