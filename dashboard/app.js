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
