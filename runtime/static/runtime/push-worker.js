// The service worker of Web Push (docs/notifications.md): served from the site's root (/push-worker.js) so its
// scope covers every chat page. It shows what the server pushed (decrypted by the browser: the push service never
// reads it) and, on a click, focuses a tab of the site on the chat at that message (or approval), or opens one. An
// approval's Approve and Deny decide it from here, with the action's single-use capability, no page opened.
"use strict";

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch (error) {
    message = {};
  }
  const title = message.title || "Impo";
  const actions = Array.isArray(message.actions) ? message.actions : [];
  const options = {
    body: message.body || "",
    // One notification per run and kind on this device: a repeat replaces it instead of buzzing twice.
    tag: message.runId ? `${message.runId}:${message.kind}` : undefined,
    data: {
      url: message.url || "/",
      kind: message.kind || "",
      conversationId: message.conversationId || "",
      approvalId: message.toolCallId || "",
      // Each action's single-use capability stays on this device, in the notification, until it is clicked.
      capabilities: Object.fromEntries(actions.map((each) => [each.action, each.capability])),
    },
    actions: actions.map((each) => ({ action: each.action, title: each.title })),
    icon: "/static/runtime/favicon.svg",
    requireInteraction: message.kind === "approval",
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  if (event.action) {
    event.waitUntil(decide(event.notification, event.action));
    return;
  }
  const url = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  event.waitUntil(openChat(url));
});

// What the follow-up notification says for each answer of the decision.
const DECIDED = { approve: "Approved", deny: "Denied" };
const REFUSED = { capability_used: "Already decided", capability_expired: "Expired", approval_cancelled: "Cancelled" };

// Approve or Deny from the notification, without opening a page: the capability is the authority (no cookie is
// sent), and a short notification in its place says what happened.
async function decide(notification, action) {
  const data = notification.data || {};
  const capability = data.capabilities && data.capabilities[action];
  if (!capability) {
    return openChat(new URL(data.url || "/", self.location.origin));
  }
  let outcome = "Not decided: open the chat";
  try {
    const response = await fetch("/api/v1/approvals/decide", {
      method: "POST",
      credentials: "omit",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ approvalId: data.approvalId, decision: action, capability }),
    });
    const body = await response.json().catch(() => ({}));
    outcome = response.ok ? DECIDED[action] : REFUSED[body.error && body.error.code] || outcome;
  } catch (error) {
    // Offline: nothing was decided; the follow-up says so and its click opens the chat.
  }
  return self.registration.showNotification(outcome, {
    body: notification.title,
    tag: notification.tag,
    data: { url: data.url || "/", kind: "decided" },
    icon: "/static/runtime/favicon.svg",
  });
}

async function openChat(url) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  // A tab already on that chat is asked to go to the message; any other tab of the site is taken there.
  const same = windows.find((client) => new URL(client.url).pathname === url.pathname);
  const target = same || windows[0];
  if (target) {
    target.postMessage({ type: "impo.open", url: url.href });
    try {
      return await target.focus();
    } catch (error) {
      return target; // focusing needs a click's activation: outside one the tab is still taken there
    }
  }
  return self.clients.openWindow(url.href);
}
