// The service worker of Web Push (docs/notifications.md): served from the site's root (/push-worker.js) so its
// scope covers every chat page. It shows what the server pushed (decrypted by the browser: the push service never
// reads it) and, on a click, focuses a tab of the site on the chat at that message (or approval), or opens one.
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
  const options = {
    body: message.body || "",
    // One notification per run and kind on this device: a repeat replaces it instead of buzzing twice.
    tag: message.runId ? `${message.runId}:${message.kind}` : undefined,
    data: { url: message.url || "/", kind: message.kind || "", conversationId: message.conversationId || "" },
    icon: "/static/runtime/favicon.svg",
    requireInteraction: message.kind === "approval",
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const url = new URL((event.notification.data && event.notification.data.url) || "/", self.location.origin);
  event.waitUntil(openChat(url));
});

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
