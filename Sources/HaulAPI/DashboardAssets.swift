// Generated from dashboard/ by scripts/embed.sh (make embed). Do not edit.
enum DashboardAssets {
    static let indexHTML = #"""
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Haul</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/ui/app.css">
<script src="/ui/app.js" defer></script>
</head>
<body>
<header>
  <h1>Haul</h1>
  <p id="totals" aria-live="polite"></p>
  <p id="connection" class="connection" data-state="connecting">connecting…</p>
</header>

<main>
  <form id="token-form" class="panel" hidden>
    <h2>This server needs a token</h2>
    <p>Enter the token the server was started with (<code>HAUL_TOKEN</code>). It is kept in this browser only.</p>
    <label>Token <input id="token" name="token" type="password" autocomplete="current-password" required></label>
    <button type="submit">Use token</button>
    <p class="problem" id="token-problem" role="alert"></p>
  </form>

  <form id="add-form" class="panel">
    <h2>Add a download</h2>
    <div class="row">
      <label class="grow">URL <input id="url" name="url" type="url" placeholder="https://example.com/file.iso" required></label>
      <button type="submit" id="add">Add</button>
    </div>
    <details>
      <summary>Options</summary>
      <div class="options">
        <label>File name <input id="filename" name="filename" placeholder="from the server"></label>
        <label>Directory <input id="directory" name="directory" placeholder="under the download root"></label>
        <label>Connections <input id="connections" name="connections" type="number" min="1" max="32" placeholder="8"></label>
        <label>Max speed (bytes/s) <input id="max_speed" name="max_speed" type="number" min="0" placeholder="no limit"></label>
        <label class="grow">Checksum <input id="checksum" name="checksum" placeholder="sha256:…"></label>
        <label class="check"><input id="start_paused" name="start_paused" type="checkbox"> Start paused</label>
      </div>
    </details>
    <p class="problem" id="add-problem" role="alert"></p>
  </form>

  <section class="panel">
    <div class="row">
      <h2 class="grow">Downloads</h2>
      <label>Show
        <select id="filter">
          <option value="">all</option>
          <option value="active">running</option>
          <option value="queued">queued</option>
          <option value="paused">paused</option>
          <option value="completed">completed</option>
          <option value="failed">failed</option>
        </select>
      </label>
    </div>
    <p id="empty" class="muted">No downloads yet.</p>
    <ul id="downloads"></ul>
  </section>
</main>

<template id="download-template">
  <li class="download">
    <div class="row">
      <span class="name grow"></span>
      <span class="state"></span>
    </div>
    <div class="bar"><div class="fill"></div></div>
    <div class="row details">
      <span class="percent"></span>
      <span class="size"></span>
      <span class="speed"></span>
      <span class="eta"></span>
      <span class="grow"></span>
      <button type="button" class="pause">Pause</button>
      <button type="button" class="resume">Resume</button>
      <button type="button" class="retry">Retry</button>
      <button type="button" class="remove">Remove</button>
    </div>
    <p class="url muted"></p>
    <p class="error problem"></p>
  </li>
</template>
</body>
</html>
"""#
    static let appJS = #"""
// Haul's dashboard: the REST API for actions, server-sent events for changes. No framework, no build step.
"use strict";

const TOKEN_KEY = "haul.token";
const ACTIVE = new Set(["probing", "downloading", "verifying"]);

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  downloads: new Map(), // id -> download resource, as the API last described it
  lastEventId: null,    // the id of the last event applied; a new stream resumes after it
  source: null,
  retryDelay: 1000,
  renderQueued: false,
};

const $ = (id) => document.getElementById(id);

// MARK: API

class Problem extends Error {
  constructor(status, body) {
    const detail = body && (body.detail || body.title);
    const fields = (body && body.errors || []).map((e) => `${e.field}: ${e.message}`);
    super([detail || `HTTP ${status}`, ...fields].join("; "));
    this.status = status;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store",
  });
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (response.status === 401) {
    askForToken(state.token ? "That token was not accepted." : "");
  }
  if (!response.ok) throw new Problem(response.status, data);
  return data;
}

// MARK: loading and following

/** Loads every download, then follows events from the sequence the list was taken at, so nothing is missed. */
async function start() {
  setConnection("connecting");
  try {
    const all = new Map();
    let cursor = null;
    let sequence = null;
    do {
      const page = await api("GET", `/downloads?limit=1000${cursor ? `&cursor=${cursor}` : ""}`);
      if (sequence === null) sequence = page.sequence;
      for (const d of page.downloads) all.set(d.id, d);
      cursor = page.next_cursor;
    } while (cursor);
    state.downloads = all;
    state.lastEventId = sequence;
    render();
    follow();
  } catch (error) {
    if (error.status === 401) return; // waits for the token form
    setConnection("down", error.message);
    retryLater();
  }
}

function follow() {
  if (state.source) state.source.close();
  const params = new URLSearchParams();
  if (state.lastEventId !== null) params.set("last_event_id", state.lastEventId);
  if (state.token) params.set("access_token", state.token); // EventSource cannot send headers
  const source = new EventSource(`/events?${params}`);
  state.source = source;
  source.onopen = () => {
    state.retryDelay = 1000;
    setConnection("live");
  };
  const track = (event) => {
    if (event.lastEventId) state.lastEventId = event.lastEventId;
  };
  for (const kind of ["created", "progress", "state"]) {
    source.addEventListener(kind, (event) => {
      track(event);
      const download = JSON.parse(event.data);
      state.downloads.set(download.id, download);
      scheduleRender();
    });
  }
  source.addEventListener("removed", (event) => {
    track(event);
    state.downloads.delete(JSON.parse(event.data).id);
    scheduleRender();
  });
  // Sent instead of the missed events when this client was away longer than the server remembers.
  source.addEventListener("snapshot", (event) => {
    track(event);
    state.downloads = new Map(JSON.parse(event.data).downloads.map((d) => [d.id, d]));
    scheduleRender();
  });
  source.onerror = () => {
    // While CONNECTING the browser retries by itself, sending Last-Event-ID. CLOSED means it gave up (the server
    // refused the stream or is gone): start over after a pause that grows.
    if (source.readyState === EventSource.CLOSED) {
      source.close();
      setConnection("down");
      retryLater();
    } else {
      setConnection("connecting");
    }
  };
}

function retryLater() {
  setTimeout(() => {
    if (state.lastEventId !== null) {
      api("GET", "/healthz").then(follow, retryLater);
    } else {
      start();
    }
  }, state.retryDelay);
  state.retryDelay = Math.min(state.retryDelay * 2, 30000);
}

/** Keeps what an action's answer says unless an event already brought a newer state of that download. */
function remember(download) {
  const known = state.downloads.get(download.id);
  if (known && known.updated_at > download.updated_at) return;
  state.downloads.set(download.id, download);
  scheduleRender();
}

// MARK: rendering

function scheduleRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    render();
  });
}

function render() {
  const list = $("downloads");
  const filter = $("filter").value;
  const shown = [...state.downloads.values()]
    .filter((d) => !filter || (filter === "active" ? ACTIVE.has(d.state) : d.state === filter))
    .sort((a, b) => (a.created_at === b.created_at ? (a.id < b.id ? 1 : -1) : a.created_at < b.created_at ? 1 : -1));
  const existing = new Map([...list.children].map((li) => [li.dataset.id, li]));
  let previous = null;
  for (const download of shown) {
    let item = existing.get(download.id);
    existing.delete(download.id);
    if (!item) item = newItem(download.id);
    update(item, download);
    const wanted = previous ? previous.nextSibling : list.firstChild;
    if (item !== wanted) list.insertBefore(item, wanted);
    previous = item;
  }
  for (const stale of existing.values()) stale.remove();
  $("empty").hidden = shown.length > 0;
  renderTotals();
}

function newItem(id) {
  const item = $("download-template").content.firstElementChild.cloneNode(true);
  item.dataset.id = id;
  const patch = (body) => act(item, () => api("PATCH", `/downloads/${id}`, body));
  item.querySelector(".pause").addEventListener("click", () => patch({ state: "paused" }));
  item.querySelector(".resume").addEventListener("click", () => patch({ state: "queued" }));
  item.querySelector(".retry").addEventListener("click", () => patch({ state: "queued" }));
  item.querySelector(".remove").addEventListener("click", () =>
    act(item, async () => {
      await api("DELETE", `/downloads/${id}`);
      state.downloads.delete(id);
      scheduleRender();
    }));
  return item;
}

/** Runs an action of one download's buttons, showing its problem under it; the event stream shows its effect. */
async function act(item, action) {
  const buttons = item.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const result = await action();
    if (result && result.id) remember(result);
    item.querySelector(".error").textContent = "";
  } catch (error) {
    item.querySelector(".error").textContent = error.message;
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

function update(item, d) {
  const set = (selector, text) => {
    const element = item.querySelector(selector);
    if (element.textContent !== text) element.textContent = text;
  };
  const name = d.filename || decodeURIComponent(new URL(d.url).pathname.split("/").pop() || "") || d.url;
  item.dataset.state = d.state;
  set(".name", name);
  item.querySelector(".name").title = d.path || name;
  const badge = item.querySelector(".state");
  badge.dataset.state = d.state;
  set(".state", d.state);
  const fill = item.querySelector(".fill");
  fill.dataset.state = d.state;
  const known = typeof d.progress === "number";
  fill.classList.toggle("unknown", !known && ACTIVE.has(d.state));
  fill.style.width = known ? `${(d.progress * 100).toFixed(1)}%` : "";
  set(".percent", known ? `${Math.floor(d.progress * 100)}%` : "");
  set(".size", d.total_bytes === null ? formatBytes(d.received_bytes)
    : `${formatBytes(d.received_bytes)} of ${formatBytes(d.total_bytes)}`);
  const running = ACTIVE.has(d.state);
  set(".speed", running && d.speed > 0 ? `${formatBytes(d.speed)}/s` : "");
  set(".eta", running && d.eta_seconds !== null ? `${formatDuration(d.eta_seconds)} left` : "");
  set(".url", d.url);
  set(".error", d.error ? `${d.error.code}: ${d.error.message}` : "");
  item.querySelector(".pause").hidden = !(running || d.state === "queued");
  item.querySelector(".resume").hidden = d.state !== "paused";
  item.querySelector(".retry").hidden = d.state !== "failed";
}

function renderTotals() {
  let running = 0;
  let speed = 0;
  for (const d of state.downloads.values()) {
    if (ACTIVE.has(d.state)) {
      running += 1;
      speed += d.speed;
    }
  }
  const count = state.downloads.size;
  $("totals").textContent = `${count} download${count === 1 ? "" : "s"}, ${running} running`
    + (speed > 0 ? `, ${formatBytes(speed)}/s` : "");
}

function setConnection(kind, detail) {
  const element = $("connection");
  element.dataset.state = kind;
  element.textContent = { live: "live", connecting: "connecting…", down: "disconnected" }[kind]
    + (detail ? ` (${detail})` : "");
}

function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 2 : 1)} ${units[unit]}`;
}

function formatDuration(seconds) {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  return `${Math.floor(s / 3600)} h ${String(Math.floor(s % 3600 / 60)).padStart(2, "0")} min`;
}

// MARK: forms

function askForToken(message) {
  if (state.source) state.source.close();
  setConnection("down", "needs a token");
  $("token-form").hidden = false;
  $("token-problem").textContent = message;
  $("token").focus();
}

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  localStorage.setItem(TOKEN_KEY, state.token);
  $("token-form").hidden = true;
  $("token").value = "";
  start();
});

$("add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = { url: $("url").value.trim() };
  for (const field of ["filename", "directory", "checksum"]) {
    const value = $(field).value.trim();
    if (value) body[field] = value;
  }
  for (const field of ["connections", "max_speed"]) {
    const value = $(field).value.trim();
    if (value) body[field] = Number(value);
  }
  if ($("start_paused").checked) body.start_paused = true;
  const button = $("add");
  button.disabled = true;
  try {
    remember(await api("POST", "/downloads", body));
    $("url").value = "";
    $("add-problem").textContent = "";
  } catch (error) {
    $("add-problem").textContent = error.message;
  } finally {
    button.disabled = false;
  }
});

$("filter").addEventListener("change", render);

start();
"""#
    static let appCSS = #"""
:root {
  color-scheme: light dark;
  --bg: #f6f7f9; --panel: #fff; --text: #1d2330; --muted: #667085; --line: #d9dde5;
  --accent: #2563eb; --ok: #16a34a; --warn: #d97706; --bad: #dc2626;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #12151b; --panel: #1b2029; --text: #e6e9ef; --muted: #98a2b3; --line: #2e3543; }
}
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--text); }
header { display: flex; align-items: baseline; gap: 1.5rem; padding: 0.8rem 1.5rem; border-bottom: 1px solid var(--line); }
header h1 { margin: 0; font-size: 1.3rem; }
header p { margin: 0; }
main { max-width: 60rem; margin: 0 auto; padding: 1rem; }
h2 { font-size: 1.05rem; margin: 0 0 0.6rem; }
.panel { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 1rem; margin-bottom: 1rem; }
.row { display: flex; align-items: center; gap: 0.75rem; flex-wrap: wrap; }
.grow { flex: 1 1 auto; min-width: 0; }
label { display: flex; flex-direction: column; gap: 0.2rem; font-size: 0.85rem; color: var(--muted); }
label.check { flex-direction: row; align-items: center; color: var(--text); }
input, select, button { font: inherit; color: inherit; }
input, select { padding: 0.4rem 0.5rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); }
button { padding: 0.4rem 0.9rem; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); cursor: pointer; }
button[type=submit] { background: var(--accent); border-color: var(--accent); color: #fff; align-self: flex-end; }
button:disabled { opacity: 0.5; cursor: default; }
details { margin-top: 0.6rem; }
.options { display: flex; flex-wrap: wrap; gap: 0.75rem; margin-top: 0.6rem; }
.muted { color: var(--muted); }
.problem { color: var(--bad); margin: 0.4rem 0 0; }
.problem:empty { display: none; }
.connection::before { content: "●"; margin-right: 0.3rem; }
.connection[data-state=live]::before { color: var(--ok); }
.connection[data-state=connecting]::before { color: var(--warn); }
.connection[data-state=down]::before { color: var(--bad); }
#downloads { list-style: none; margin: 0; padding: 0; }
.download { border-top: 1px solid var(--line); padding: 0.7rem 0; }
.download:first-child { border-top: none; }
.download .name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.download .url { font-size: 0.8rem; margin: 0.2rem 0 0; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.download .details { font-size: 0.85rem; color: var(--muted); }
.download .details button { font-size: 0.8rem; padding: 0.2rem 0.6rem; }
.state { font-size: 0.8rem; padding: 0.1rem 0.5rem; border-radius: 999px; border: 1px solid var(--line); }
.state[data-state=completed] { color: var(--ok); border-color: var(--ok); }
.state[data-state=failed] { color: var(--bad); border-color: var(--bad); }
.state[data-state=downloading], .state[data-state=probing], .state[data-state=verifying] { color: var(--accent); border-color: var(--accent); }
.bar { height: 8px; background: var(--line); border-radius: 4px; overflow: hidden; margin: 0.4rem 0; }
.fill { height: 100%; width: 0; background: var(--accent); transition: width 0.2s linear; }
.fill[data-state=completed] { background: var(--ok); }
.fill[data-state=failed] { background: var(--bad); }
.fill[data-state=paused] { background: var(--warn); }
.fill.unknown { width: 100%; opacity: 0.35; }
.download .details span:empty:not(.grow) { display: none; }
.download .error { font-size: 0.85rem; }
"""#
}
