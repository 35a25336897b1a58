// The web chat page as a device (docs/design.md §4): it registers with a stable installation id, claims the
// invocations addressed to it and runs their handlers. Only a claim authorises execution, and each
// result is saved locally *before* it is posted, so a reload, a replayed stream or a lost response
// re-posts the saved result instead of playing the sound again. Tabs and windows of one browser share
// the installation (and so the device and its receipts): a Web Lock per invocation lets one of them act
// while the others wait, then find its receipt and do nothing, so an invocation runs once between them.
(function () {
  "use strict";

  const INSTALLATION_KEY = "impo.installationId";
  const RECEIPTS_KEY = "impo.deviceReceipts";
  const DEFAULT_VOLUME = 0.5;
  // Each sound is a short sequence of tones: [frequency Hz, seconds].
  const SOUNDS = {
    chime: [[880, 0.15], [1320, 0.25]],
    beep: [[1000, 0.2]],
    alert: [[660, 0.12], [0, 0.06], [660, 0.12], [0, 0.06], [660, 0.12]],
    ding: [[1568, 0.3]],
  };

  let deviceId = null;
  let checking = null;

  function installationId() {
    let id = localStorage.getItem(INSTALLATION_KEY);
    if (!id) {
      id = ImpoApi.newId();
      localStorage.setItem(INSTALLATION_KEY, id);
    }
    return id;
  }

  function receipts() {
    try {
      return JSON.parse(localStorage.getItem(RECEIPTS_KEY) || "{}");
    } catch (error) {
      return {};
    }
  }

  function saveReceipt(invocationId, receipt) {
    localStorage.setItem(RECEIPTS_KEY, JSON.stringify({ ...receipts(), [invocationId]: receipt }));
  }

  async function register() {
    const result = await ImpoApi.call("POST", "/api/v1/devices/register", {
      installationId: installationId(),
      tools: Object.keys(handlers),
    });
    if (!result.ok) throw new Error(`device registration failed (${result.status})`);
    deviceId = result.body.deviceId;
    return deviceId;
  }

  async function playSound(input) {
    const tones = SOUNDS[input.sound];
    if (!tones) return { success: false, error: { code: "unknown_sound", message: `No sound named "${input.sound}".` } };
    const AudioContext = window.AudioContext || window.webkitAudioContext;
    if (!AudioContext) return { success: false, error: { code: "audio_unavailable", message: "This browser has no Web Audio." } };
    const context = new AudioContext();
    try {
      if (context.state === "suspended") await Promise.race([context.resume(), new Promise((r) => setTimeout(r, 1000))]);
      if (context.state !== "running") {
        return { success: false, error: { code: "autoplay_blocked", message: "The browser did not allow audio to play." } };
      }
      const gain = context.createGain();
      gain.gain.value = input.volume === undefined ? DEFAULT_VOLUME : input.volume;
      gain.connect(context.destination);
      let at = context.currentTime;
      for (const [frequency, seconds] of tones) {
        if (frequency) {
          const oscillator = context.createOscillator();
          oscillator.frequency.value = frequency;
          oscillator.connect(gain);
          oscillator.start(at);
          oscillator.stop(at + seconds);
        }
        at += seconds;
      }
      const durationMs = Math.round(tones.reduce((total, [, seconds]) => total + seconds, 0) * 1000);
      await new Promise((resolve) => setTimeout(resolve, durationMs));
      return { success: true, output: { played: input.sound, durationMs } };
    } finally {
      context.close();
    }
  }

  const handlers = { play_sound: playSound };

  // Posts a saved result; it stays saved (a device keeps its receipts) and is marked once answered.
  async function deliver(invocationId, receipt) {
    const result = await ImpoApi.call("POST", `/api/v1/device-tool-invocations/${invocationId}/result`, receipt.result);
    const answered = result.ok || (result.status >= 400 && result.status < 500);
    if (answered) saveReceipt(invocationId, { ...receipt, delivered: true, answer: result.ok ? "accepted" : result.body.error.code });
  }

  function handle(invocation) {
    // Same-origin tabs share the lock manager; a browser without one keeps the once-per-tab guarantee.
    if (!navigator.locks) return handleAlone(invocation);
    return navigator.locks.request(`impo.invocation.${invocation.invocationId}`, () => handleAlone(invocation));
  }

  // Runs with this invocation's lock held (where locks exist): the receipts read here are every tab's.
  async function handleAlone(invocation) {
    const saved = receipts()[invocation.invocationId];
    if (saved && saved.result) {
      if (!saved.delivered) await deliver(invocation.invocationId, saved);
      return;
    }
    if (saved) return; // it started here and its outcome is unknown: the deadline makes it uncertain
    const handler = handlers[invocation.toolName];
    if (!handler) return;
    const claim = await ImpoApi.call("POST", `/api/v1/device-tool-invocations/${invocation.invocationId}/claim`, { deviceId });
    if (!claim.ok) return; // expired, cancelled or another device's: nothing may run
    const executionId = claim.body.executionId;
    saveReceipt(invocation.invocationId, { executionId, startedAt: new Date().toISOString() });
    let outcome;
    try {
      outcome = await handler(invocation.input);
    } catch (error) {
      outcome = { success: false, error: { code: "device_error", message: String(error) } };
    }
    const receipt = { executionId, result: { deviceId, executionId, ...outcome } };
    saveReceipt(invocation.invocationId, receipt);
    await deliver(invocation.invocationId, receipt);
  }

  async function checkPending() {
    if (!deviceId) return;
    const result = await ImpoApi.call("GET", `/api/v1/devices/${deviceId}/tool-invocations?status=pending`);
    if (!result.ok) return;
    for (const invocation of result.body.invocations) await handle(invocation);
  }

  // Serialised: a tool.requested event and a reconnect may both ask at once; one pass at a time.
  function check() {
    checking = (checking || Promise.resolve()).then(checkPending, checkPending).catch(() => {});
    return checking;
  }

  window.ImpoDevice = {
    register,
    check,
    get id() {
      return deviceId;
    },
  };
})();
