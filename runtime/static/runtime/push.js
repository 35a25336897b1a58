// Notifications in the web chat (docs/notifications.md): the "Notify me" control, the kinds a person wants, the
// browsers registered, the page's visibility reported over the chat's socket (no push while it is in view), and
// the landing at a message or an approval when a notification is clicked.
(function () {
  "use strict";

  const chat = document.getElementById("chat");
  if (!chat) return;
  const head = chat.querySelector(".chat-head");
  const KINDS = [
    ["completed", "Replies"],
    ["approval", "Approvals waiting"],
    ["failed", "Failures"],
    ["cancelled", "Cancelled by someone else"],
    ["reconciliation", "Replies held for checking"],
  ];
  const supported = "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;

  // --- visibility, over the chat's socket --------------------------------------------------------------

  let socket = null;
  function reportVisibility() {
    if (!socket || socket.readyState !== WebSocket.OPEN) return;
    socket.send(JSON.stringify({ type: "visibility", visible: document.visibilityState === "visible" }));
  }
  window.addEventListener("impo:socket-open", (event) => {
    socket = event.detail;
    reportVisibility();
  });
  document.addEventListener("visibilitychange", reportVisibility);

  // --- landing at a message or an approval -------------------------------------------------------------

  function land(hash) {
    const match = /^#(message|approval)-([0-9a-f-]{36})$/.exec(hash || "");
    if (!match) return;
    const selector = match[1] === "message" ? `[data-message-id="${match[2]}"]` : `[data-approval-id="${match[2]}"]`;
    const found = () => {
      const element = document.querySelector(selector);
      if (!element) return false;
      const details = element.closest("details");
      if (details) details.open = true;
      element.scrollIntoView({ block: "center" });
      const item = element.closest("[data-message-id]") || element;
      item.classList.add("landed");
      setTimeout(() => item.classList.remove("landed"), 3000);
      return true;
    };
    if (found()) return;
    // The history is still loading: land once the element is drawn (or give up after a while).
    const observer = new MutationObserver(() => found() && observer.disconnect());
    observer.observe(chat, { childList: true, subtree: true, attributes: true, attributeFilter: ["data-approval-id"] });
    setTimeout(() => observer.disconnect(), 15000);
  }
  land(location.hash);
  window.addEventListener("hashchange", () => land(location.hash));
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.addEventListener("message", (event) => {
      if (!event.data || event.data.type !== "impo.open") return;
      const url = new URL(event.data.url, location.origin);
      if (url.origin !== location.origin) return;
      if (url.pathname === location.pathname) {
        history.replaceState(null, "", url.hash);
        land(url.hash);
      } else {
        location.assign(url.href);
      }
    });
  }

  // --- the control -------------------------------------------------------------------------------------

  const box = document.createElement("details");
  box.className = "notify";
  const summary = document.createElement("summary");
  summary.textContent = "Notifications";
  const toggle = document.createElement("button");
  toggle.type = "button";
  toggle.id = "notify-toggle";
  toggle.className = "secondary";
  const status = document.createElement("p");
  status.id = "notify-status";
  status.className = "note";
  status.setAttribute("role", "status");
  const kinds = document.createElement("fieldset");
  kinds.className = "notify-kinds";
  const legend = document.createElement("legend");
  legend.textContent = "Tell me about";
  kinds.append(legend);
  const browsers = document.createElement("ul");
  browsers.id = "notify-browsers";
  browsers.className = "notify-browsers";
  box.append(summary, toggle, status, kinds, browsers);
  head.append(box);
  // Escape closes the panel, from anywhere in it, and gives the focus back to the button that opened it.
  box.addEventListener("keydown", (event) => {
    if (event.key !== "Escape" || !box.open) return;
    event.stopPropagation();
    box.open = false;
    summary.focus();
  });

  let vapidPublicKey = null;
  let registration = null;

  function keyBytes(base64url) {
    const padded = base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4);
    return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
  }

  async function currentSubscription() {
    return registration ? registration.pushManager.getSubscription() : null;
  }

  function show(state, text) {
    box.dataset.state = state;
    toggle.dataset.state = state;
    toggle.textContent = state === "on" ? "Turn off notifications" : "Notify me";
    toggle.disabled = state === "blocked" || state === "unsupported" || state === "busy";
    toggle.setAttribute("aria-pressed", state === "on" ? "true" : "false");
    status.textContent = text;
  }

  async function draw() {
    if (!supported) return show("unsupported", "This browser cannot show notifications.");
    if (!vapidPublicKey) return show("unsupported", "Notifications are not set up on this server.");
    if (Notification.permission === "denied") {
      return show("blocked", "Blocked by the browser: allow notifications for this site in its settings.");
    }
    const subscription = await currentSubscription();
    if (subscription && Notification.permission === "granted") {
      return show("on", "On: this browser is told when a reply finishes or waits for you while you are away.");
    }
    return show("off", "Off for this browser.");
  }

  async function loadSubscriptions() {
    const response = await ImpoApi.call("GET", "/api/v1/push-subscriptions");
    if (!response.ok) return [];
    vapidPublicKey = response.body.vapidPublicKey;
    const mine = await currentSubscription();
    browsers.replaceChildren();
    for (const each of response.body.subscriptions) {
      const item = document.createElement("li");
      const label = document.createElement("span");
      const here = mine && mine.endpoint === each.endpoint;
      label.textContent = `${here ? "This browser" : "A browser"}, since ${new Date(each.createdAt).toLocaleDateString()}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "link";
      remove.textContent = "Remove";
      remove.addEventListener("click", async () => {
        if (here && mine) await mine.unsubscribe();
        await ImpoApi.call("DELETE", `/api/v1/push-subscriptions/${each.id}`);
        await refresh();
      });
      item.append(label, " ", remove);
      browsers.append(item);
    }
    return response.body.subscriptions;
  }

  async function loadKinds() {
    const response = await ImpoApi.call("GET", "/api/v1/notification-preferences");
    if (!response.ok) return;
    kinds.querySelectorAll("label").forEach((label) => label.remove());
    for (const [kind, text] of KINDS) {
      const label = document.createElement("label");
      const input = document.createElement("input");
      input.type = "checkbox";
      input.name = `notify-${kind}`;
      input.checked = response.body.kinds[kind] !== false;
      input.addEventListener("change", async () => {
        const saved = await ImpoApi.call("PUT", "/api/v1/notification-preferences", {
          kinds: { [kind]: input.checked },
        });
        if (!saved.ok) input.checked = !input.checked;
      });
      label.append(input, " ", text);
      kinds.append(label);
    }
  }

  async function refresh() {
    await loadSubscriptions();
    await draw();
  }

  async function turnOn() {
    show("busy", "Asking the browser…");
    // Asked only now, because the person clicked: a page that asks on load is blocked by browsers.
    const permission = await Notification.requestPermission();
    if (permission !== "granted") return draw();
    try {
      const subscription =
        (await registration.pushManager.getSubscription()) ||
        (await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(vapidPublicKey) }));
      const saved = await ImpoApi.call("POST", "/api/v1/push-subscriptions", subscription.toJSON());
      if (!saved.ok) {
        await subscription.unsubscribe();
        show("off", (saved.body && saved.body.error && saved.body.error.message) || "The server refused it.");
        return;
      }
    } catch (error) {
      show("off", `The browser could not subscribe: ${error.message}`);
      return;
    }
    await refresh();
  }

  async function turnOff() {
    show("busy", "Turning off…");
    const subscription = await currentSubscription();
    const listed = await ImpoApi.call("GET", "/api/v1/push-subscriptions");
    if (subscription) {
      const mine = listed.ok && listed.body.subscriptions.find((each) => each.endpoint === subscription.endpoint);
      if (mine) await ImpoApi.call("DELETE", `/api/v1/push-subscriptions/${mine.id}`);
      await subscription.unsubscribe();
    }
    await refresh();
  }

  toggle.addEventListener("click", () => (box.dataset.state === "on" ? turnOff() : turnOn()));

  (async function start() {
    show("busy", "");
    if (supported) registration = await navigator.serviceWorker.register("/push-worker.js", { scope: "/" });
    await loadKinds();
    await refresh();
  })();
})();
