// The Scheduled tasks page: a client of /api/v1/scheduled-tasks (docs/design.md §7) and nothing else. Every
// change sends the plan's current revision, so an edit made elsewhere in the meantime is refused (409)
// instead of overwritten; the page then reloads the list.
(function () {
  "use strict";

  const API = "/api/v1/scheduled-tasks";
  const list = document.getElementById("schedule-list");
  const empty = document.getElementById("schedule-empty");
  const errorBox = document.getElementById("schedule-error");
  const form = document.getElementById("schedule-form");
  const formTitle = document.getElementById("schedule-form-title");
  const saveButton = document.getElementById("schedule-save");
  const cancelEdit = document.getElementById("schedule-cancel-edit");
  const DAY_NAMES = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
  const RUN_WORDS = {
    queued: "Queued",
    in_progress: "In progress",
    completed: "Completed",
    failed: "Failed",
    cancelled: "Cancelled",
    skipped_overlap: "Skipped: the previous run was still going",
  };
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  let plans = [];

  function fail(body) {
    ImpoUi.showError(errorBox, body);
  }

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function when(iso, timeZone) {
    if (!iso) return "—";
    return new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short", timeZone }).format(new Date(iso));
  }

  function describe(schedule) {
    const zone = schedule.timeZone;
    switch (schedule.frequency) {
      case "once":
        return `Once, ${when(schedule.runAt, zone)} (${zone})`;
      case "daily":
        return `Every day at ${schedule.time} (${zone})`;
      case "weekly":
        return `Every ${schedule.weekdays.map((day) => DAY_NAMES[day - 1]).join(", ")} at ${schedule.time} (${zone})`;
      default:
        return `Cron "${schedule.cron}" (${zone})`;
    }
  }

  async function load() {
    const result = await ImpoApi.call("GET", API);
    if (!result.ok) return fail(result.body);
    plans = result.body.schedules;
    draw();
  }

  function draw() {
    empty.hidden = plans.length > 0;
    list.replaceChildren(...plans.map(planItem));
  }

  // A one-off plan whose time has come and gone (it ran, or its moment passed) has nothing left to do: it is
  // "Done", not "Active", and there is nothing to pause or resume.
  function stateOf(plan) {
    if (plan.schedule.frequency === "once" && !plan.nextRunAt) return ["done", "Done"];
    return plan.enabled ? ["active", "Active"] : ["paused", "Paused"];
  }

  function planItem(plan) {
    const [state, stateWords] = stateOf(plan);
    const item = element("li", `schedule${state === "active" ? "" : " is-paused"}`);
    item.dataset.scheduleId = plan.id;
    const head = element("div", "schedule-head");
    head.append(element("h2", "schedule-title", plan.title));
    head.append(element("span", `status status-${state}`, stateWords));
    item.append(head);
    item.append(element("p", "schedule-when", describe(plan.schedule)));
    const next = plan.enabled && plan.nextRunAt ? `Next run: ${when(plan.nextRunAt, plan.schedule.timeZone)}` : "No run planned";
    item.append(element("p", "muted schedule-next", next));
    item.append(element("p", "schedule-goal", plan.goal));

    const actions = element("div", "actions");
    if (state !== "done") actions.append(button(plan.enabled ? "Pause" : "Resume", "pause", () => setEnabled(plan, !plan.enabled), plan.title));
    actions.append(
      button("Edit", "edit", () => edit(plan), plan.title),
      button("Delete", "delete danger", () => remove(plan), plan.title),
    );
    item.append(actions);

    const runs = element("details", "runs");
    runs.append(element("summary", "", "Runs"));
    const runList = element("ul", "run-list");
    runs.append(runList);
    runs.addEventListener("toggle", () => {
      if (runs.open) loadRuns(plan, runList);
    });
    item.append(runs);
    return item;
  }

  function button(label, className, onClick, planTitle) {
    const node = element("button", `secondary ${className}`, label);
    node.type = "button";
    node.setAttribute("aria-label", `${label} “${planTitle}”`);
    node.addEventListener("click", onClick);
    return node;
  }

  async function loadRuns(plan, runList, before) {
    const result = await ImpoApi.call("GET", `${API}/${plan.id}/runs${before ? `?before=${encodeURIComponent(before)}` : ""}`);
    if (!result.ok) return fail(result.body);
    const items = result.body.runs.map((run) => {
      const item = element("li");
      const label = `${when(run.scheduledAt, plan.schedule.timeZone)} — ${RUN_WORDS[run.status] || run.status}`;
      if (run.taskId) {
        const link = element("a", "", label);
        link.href = `/tasks/${run.taskId}/`;
        item.append(link);
      } else item.textContent = label;
      return item;
    });
    if (!before) runList.replaceChildren();
    if (!items.length && !before) runList.append(element("li", "muted", "No runs yet."));
    runList.append(...items);
    if (result.body.nextCursor) {
      const more = element("li");
      const next = button("Older runs", "more", () => {
        more.remove();
        loadRuns(plan, runList, result.body.nextCursor);
      }, plan.title);
      more.append(next);
      runList.append(more);
    }
  }

  function replace(updated) {
    plans = plans.map((plan) => (plan.id === updated.id ? updated : plan));
    draw();
  }

  // A refused form marks every field the API named (`error.fields`), each with its words beside it.
  const FIELD_ELEMENTS = {
    title: "[name=title]",
    goal: "[name=goal]",
    enabled: "[name=enabled]",
    "schedule.frequency": "[name=frequency]",
    "schedule.timeZone": "[name=timeZone]",
    "schedule.runAt": "[name=runAt]",
    "schedule.time": "[name=time]",
    "schedule.cron": "[name=cron]",
    "schedule.weekdays": ".weekdays",
  };

  function fieldSentence(message) {
    if (/blank|required|may not be null/i.test(message)) return "Fill this in.";
    const text = message.replace(/\.$/, "");
    return /^[a-z]/.test(text) ? `This ${text}.` : `${text}.`;
  }

  function clearFieldErrors() {
    for (const note of form.querySelectorAll(".field-error")) note.remove();
    for (const field of form.querySelectorAll("[aria-invalid]")) {
      field.removeAttribute("aria-invalid");
      field.removeAttribute("aria-describedby");
    }
  }

  function markFields(fields) {
    let first = null;
    for (const [path, message] of Object.entries(fields || {})) {
      const field = FIELD_ELEMENTS[path] && form.querySelector(FIELD_ELEMENTS[path]);
      if (!field) continue;
      const note = element("span", "error field-error", fieldSentence(message));
      note.id = `schedule-error-${path.replace(/\W/g, "-")}`;
      field.setAttribute("aria-invalid", "true");
      field.setAttribute("aria-describedby", note.id);
      (field.closest("label, fieldset") || field).append(note);
      first = first || field;
    }
    if (first) first.focus();
  }

  async function afterRefusal(result) {
    fail(result.body);
    if (result.body && result.body.error) markFields(result.body.error.fields);
    if (result.status === 409 || result.status === 410) await load(); // changed or deleted elsewhere
  }

  async function setEnabled(plan, enabled) {
    errorBox.hidden = true;
    const body = { revision: plan.revision, title: plan.title, goal: plan.goal, schedule: plan.schedule, enabled };
    const result = await ImpoApi.call("PUT", `${API}/${plan.id}`, body);
    if (result.ok) replace(result.body);
    else await afterRefusal(result);
  }

  async function remove(plan) {
    if (!window.confirm(`Delete the scheduled task “${plan.title}”? Tasks it already started keep running.`)) return;
    errorBox.hidden = true;
    const result = await ImpoApi.call("DELETE", `${API}/${plan.id}`, { revision: plan.revision });
    if (result.ok) {
      plans = plans.filter((other) => other.id !== plan.id);
      draw();
    } else await afterRefusal(result);
  }

  // --- the form: create, or edit the plan whose id it holds -------------------------------------------

  function fillTimeZones() {
    const zones = Intl.supportedValuesOf ? Intl.supportedValuesOf("timeZone") : [];
    const names = [...new Set(["UTC", browserZone, ...zones])].sort();
    form.timeZone.replaceChildren(...names.map((zone) => new Option(zone, zone, false, zone === browserZone)));
  }

  function showFieldsFor(frequency) {
    for (const node of form.querySelectorAll("[data-for]")) node.hidden = !node.dataset.for.split(" ").includes(frequency);
  }

  // The wall clock of `timeZone` at instant `date`, as {year, month, day, hour, minute} strings.
  function zoneParts(date, timeZone) {
    const format = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "2-digit",
      day: "2-digit",
      hour: "2-digit",
      minute: "2-digit",
    });
    return Object.fromEntries(format.formatToParts(date).map((part) => [part.type, part.value]));
  }

  // The UTC offset of `timeZone` at the wall-clock time `local` ("YYYY-MM-DDTHH:mm"), as "+HH:MM".
  function offsetAt(local, timeZone) {
    const asUtc = new Date(`${local}:00Z`);
    const parts = zoneParts(asUtc, timeZone);
    const wall = Date.UTC(parts.year, parts.month - 1, parts.day, parts.hour, parts.minute);
    const minutes = Math.round((wall - asUtc.getTime()) / 60000);
    const abs = Math.abs(minutes);
    const pad = (value) => String(value).padStart(2, "0");
    return `${minutes < 0 ? "-" : "+"}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
  }

  function wallTime(iso, timeZone) {
    const parts = zoneParts(new Date(iso), timeZone);
    return `${parts.year}-${parts.month}-${parts.day}T${parts.hour}:${parts.minute}`;
  }

  function scheduleFromForm() {
    const frequency = form.frequency.value;
    const timeZone = form.timeZone.value;
    const local = form.runAt.value;
    return {
      frequency,
      timeZone,
      runAt: frequency === "once" && local ? `${local}:00${offsetAt(local, timeZone)}` : null,
      time: frequency === "daily" || frequency === "weekly" ? form.time.value || null : null,
      weekdays: frequency === "weekly" ? [...form.querySelectorAll("[name=weekdays]:checked")].map((box) => Number(box.value)) : null,
      cron: frequency === "cron" ? form.cron.value.trim() : null,
    };
  }

  function resetForm() {
    clearFieldErrors();
    form.reset();
    form.id.value = "";
    form.revision.value = "";
    fillTimeZones();
    formTitle.textContent = "New scheduled task";
    saveButton.textContent = "Create schedule";
    cancelEdit.hidden = true;
    showFieldsFor(form.frequency.value);
  }

  function edit(plan) {
    resetForm();
    const schedule = plan.schedule;
    form.id.value = plan.id;
    form.revision.value = plan.revision;
    form.title.value = plan.title;
    form.goal.value = plan.goal;
    form.frequency.value = schedule.frequency;
    form.timeZone.value = schedule.timeZone;
    form.enabled.checked = plan.enabled;
    if (schedule.runAt) form.runAt.value = wallTime(schedule.runAt, schedule.timeZone);
    if (schedule.time) form.time.value = schedule.time;
    if (schedule.cron) form.cron.value = schedule.cron;
    for (const box of form.querySelectorAll("[name=weekdays]")) box.checked = (schedule.weekdays || []).includes(Number(box.value));
    formTitle.textContent = `Edit “${plan.title}”`;
    saveButton.textContent = "Save changes";
    cancelEdit.hidden = false;
    showFieldsFor(schedule.frequency);
    form.title.focus();
  }

  form.frequency.addEventListener("change", () => showFieldsFor(form.frequency.value));
  cancelEdit.addEventListener("click", resetForm);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    errorBox.hidden = true;
    clearFieldErrors();
    const content = {
      title: form.title.value,
      goal: form.goal.value,
      schedule: scheduleFromForm(),
      enabled: form.enabled.checked,
    };
    saveButton.disabled = true;
    const editing = form.id.value;
    const result = editing
      ? await ImpoApi.call("PUT", `${API}/${editing}`, { revision: form.revision.value, ...content })
      : await ImpoApi.call("POST", API, { clientRequestId: ImpoApi.newId(), ...content });
    saveButton.disabled = false;
    if (!result.ok) return afterRefusal(result);
    if (editing) replace(result.body);
    else {
      plans = [...plans, result.body];
      draw();
    }
    resetForm();
  });

  resetForm();
  load();
})();
