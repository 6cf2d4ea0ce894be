// Haul's dashboard: the REST API for actions, server-sent events for changes. No framework, no build step.
"use strict";

const TOKEN_KEY = "haul.token";
const DENSITY_KEY = "haul.density";
const ACTIVE = new Set(["probing", "downloading", "verifying"]);
const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
// Rows are drawn only where the list is scrolled to: 10,000 downloads cost the page the rows on screen.
const ROW_HEIGHT = { comfortable: 44, compact: 28 };
const OVERSCAN = 8;

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  downloads: new Map(), // id -> download resource, as the API last described it
  lastEventId: null,    // the id of the last event applied; a new stream resumes after it
  source: null,
  retryDelay: 1000,
  renderQueued: false,
  windowQueued: false,
  shown: [],            // the downloads the filter, search and sort give, in order
  rendered: new Map(),  // id -> row element on screen
  pool: [],             // row elements off screen, for reuse
  selected: new Set(),
  density: localStorage.getItem(DENSITY_KEY) === "compact" ? "compact" : "comfortable",
};

const $ = (id) => document.getElementById(id);

// MARK: API

class Problem extends Error {
  constructor(status, body) {
    super(problemText(body) || `HTTP ${status}`);
    this.status = status;
  }
}

/** A problem document as one line: its fields' messages, else its detail or title. */
function problemText(body) {
  if (!body) return "";
  const fields = (body.errors || []).map((e) => `${e.field}: ${e.message}`);
  return fields.length ? fields.join("; ") : body.detail || body.title || "";
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
    loadSettings();
    loadDisk();
  } catch (error) {
    if (error.status === 401) return; // waits for the token form
    setConnection("down", error.message);
    retryLater();
  }
}

/**
 * A short-lived ticket opening `path` (a stream or a file) for a URL the browser sends without headers: the token
 * itself never goes into a URL, where logs and history keep it. None is needed without a token.
 */
async function ticketed(path, params = new URLSearchParams()) {
  if (state.token) params.set("ticket", (await api("POST", "/tickets", { path })).ticket);
  const query = params.toString();
  return query ? `${path}?${query}` : path;
}

async function follow() {
  if (state.source) state.source.close();
  state.source = null;
  const params = new URLSearchParams();
  if (state.lastEventId !== null) params.set("last_event_id", state.lastEventId);
  let url;
  try {
    // A ticket each time: the browser's own reconnects reuse the URL, and once it expired the stream is refused
    // (CLOSED below), which comes back here for a new one.
    url = await ticketed("/events", params);
  } catch (error) {
    if (error.status === 401) return; // waits for the token form
    setConnection("down", error.message);
    retryLater();
    return;
  }
  const source = new EventSource(url);
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
    forget(JSON.parse(event.data).id);
  });
  // Sent instead of the missed events when this client was away longer than the server remembers.
  source.addEventListener("snapshot", (event) => {
    track(event);
    state.downloads = new Map(JSON.parse(event.data).downloads.map((d) => [d.id, d]));
    for (const id of [...state.selected]) if (!state.downloads.has(id)) state.selected.delete(id);
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

function forget(id) {
  state.downloads.delete(id);
  state.selected.delete(id);
  scheduleRender();
}

// MARK: the list

function scheduleRender() {
  if (state.renderQueued) return;
  state.renderQueued = true;
  requestAnimationFrame(() => {
    state.renderQueued = false;
    render();
  });
}

function displayName(d) {
  if (d.filename) return d.filename;
  try {
    return decodeURIComponent(new URL(d.url).pathname.split("/").pop() || "") || d.url;
  } catch {
    return d.url;
  }
}

const isRetrying = (d) => Boolean(d.next_attempt_at);

function matches(d, filter, search) {
  if (filter === "active" && !ACTIVE.has(d.state)) return false;
  if (filter === "retrying" && !isRetrying(d)) return false;
  if (filter && filter !== "active" && filter !== "retrying" && d.state !== filter) return false;
  return !search || displayName(d).toLowerCase().includes(search) || d.url.toLowerCase().includes(search);
}

/** The comparison of `sort` ("name", "-size", ...): ties in creation order, newest first. `rank` is each
 * download's place in creation order (the order the list and the events brought them in): a batch's downloads share
 * one created_at. */
function comparator(sort, rank) {
  const descending = sort.startsWith("-");
  const key = descending ? sort.slice(1) : sort;
  const value = {
    created: (d) => d.created_at,
    name: (d) => displayName(d).toLowerCase(),
    size: (d) => (d.total_bytes === null ? -1 : d.total_bytes),
    progress: (d) => (typeof d.progress === "number" ? d.progress : -1),
    speed: (d) => d.speed,
  }[key] || ((d) => d.created_at);
  const older = key === "created" && !descending ? -1 : 1;
  return (a, b) => {
    const x = value(a);
    const y = value(b);
    if (x !== y) return (x < y ? -1 : 1) * (descending ? -1 : 1);
    return (rank.get(a.id) - rank.get(b.id)) * -older;
  };
}

function render() {
  const filter = $("filter").value;
  const search = $("search").value.trim().toLowerCase();
  const shown = [];
  const rank = new Map();
  for (const d of state.downloads.values()) {
    rank.set(d.id, rank.size);
    if (matches(d, filter, search)) shown.push(d);
  }
  shown.sort(comparator($("sort").value, rank));
  state.shown = shown;
  $("spacer").style.height = `${shown.length * ROW_HEIGHT[state.density]}px`;
  renderWindow();
  $("empty").hidden = shown.length > 0;
  $("empty").textContent = state.downloads.size ? "Nothing matches." : "No downloads yet.";
  renderTotals();
  renderSelection();
}

/** Draws the rows the viewport shows (and a few around them), reusing the elements of rows scrolled away. */
function renderWindow() {
  const viewport = $("viewport");
  const height = ROW_HEIGHT[state.density];
  const first = Math.max(0, Math.floor(viewport.scrollTop / height) - OVERSCAN);
  const last = Math.min(state.shown.length,
    Math.ceil((viewport.scrollTop + viewport.clientHeight) / height) + OVERSCAN);
  const wanted = new Set();
  for (let index = first; index < last; index += 1) {
    const d = state.shown[index];
    wanted.add(d.id);
    let row = state.rendered.get(d.id);
    if (!row) {
      row = state.pool.pop() || newRow();
      row.dataset.id = d.id;
      state.rendered.set(d.id, row);
      $("spacer").appendChild(row);
    }
    row.style.transform = `translateY(${index * height}px)`;
    update(row, d);
  }
  for (const [id, row] of state.rendered) {
    if (wanted.has(id)) continue;
    state.rendered.delete(id);
    row.remove();
    state.pool.push(row);
  }
}

/** A row; its buttons act on whichever download it shows when clicked (rows are reused). */
function newRow() {
  const row = $("row-template").content.firstElementChild.cloneNode(true);
  const id = () => row.dataset.id;
  const patch = (body) => act(row, () => api("PATCH", `/downloads/${id()}`, body));
  row.querySelector(".pause").addEventListener("click", () => patch({ state: "paused" }));
  row.querySelector(".resume").addEventListener("click", () => patch({ state: "queued" }));
  row.querySelector(".retry").addEventListener("click", () => patch({ state: "queued" }));
  const remove = (deleteFile) => act(row, async () => {
    const target = id();
    await api("DELETE", `/downloads/${target}${deleteFile ? "?delete_file=true" : ""}`);
    forget(target);
  });
  row.querySelector(".file").addEventListener("click", (event) => {
    if (!state.token) return; // the link works as it is
    event.preventDefault();
    act(row, async () => { window.location.assign(await ticketed(`/downloads/${id()}/file`)); });
  });
  row.querySelector(".remove").addEventListener("click", () => remove(false));
  row.querySelector(".delete").addEventListener("click", () => remove(true));
  row.querySelector(".select").addEventListener("change", (event) => {
    if (event.target.checked) state.selected.add(id()); else state.selected.delete(id());
    renderSelection();
  });
  return row;
}

/** Runs an action of one row's buttons, showing its problem in the row; the event stream shows its effect. */
async function act(row, action) {
  const buttons = row.querySelectorAll("button");
  buttons.forEach((b) => { b.disabled = true; });
  const target = row.dataset.id;
  try {
    const result = await action();
    if (result && result.id) remember(result);
    problems.delete(target);
  } catch (error) {
    problems.set(target, error.message);
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
    scheduleRender();
  }
}

/** An action's problem for a download, shown in its row until the next action on it. */
const problems = new Map();

function update(row, d) {
  const set = (selector, text) => {
    const element = row.querySelector(selector);
    if (element.textContent !== text) element.textContent = text;
  };
  const name = displayName(d);
  row.dataset.state = d.state;
  row.dataset.name = name;
  row.classList.toggle("retrying", isRetrying(d));
  set(".label", name);
  const link = row.querySelector(".file");
  const done = d.state === "completed";
  link.hidden = !done;
  if (done) {
    // With a token the click fetches a ticket first (openFile); the href itself carries no credential.
    const href = `/downloads/${d.id}/file`;
    if (link.getAttribute("href") !== href) link.setAttribute("href", href);
    if (link.textContent !== name) link.textContent = name;
  }
  row.querySelector(".label").hidden = done;
  row.querySelector(".name").title = `${d.path || name}\n${d.url}`;
  const badge = row.querySelector(".state");
  badge.dataset.state = d.state;
  set(".state", d.state);
  const fill = row.querySelector(".fill");
  fill.dataset.state = d.state;
  const known = typeof d.progress === "number";
  fill.classList.toggle("unknown", !known && ACTIVE.has(d.state));
  fill.style.width = known ? `${(d.progress * 100).toFixed(1)}%` : "";
  set(".percent", known ? `${Math.floor(d.progress * 100)}%` : "");
  set(".size", d.total_bytes === null ? formatBytes(d.received_bytes)
    : `${formatBytes(d.received_bytes)} of ${formatBytes(d.total_bytes)}`);
  const running = ACTIVE.has(d.state);
  set(".speed", running && d.speed > 0 ? `${formatBytes(d.speed)}/s` : "");
  const info = row.querySelector(".info");
  let text = "";
  let kind = "";
  if (problems.has(d.id)) {
    text = problems.get(d.id);
    kind = "problem";
  } else if (d.error) {
    text = `${d.error.code}: ${d.error.message}`;
    kind = "problem";
  } else if (isRetrying(d)) {
    const wait = Math.max(0, (Date.parse(d.next_attempt_at) - Date.now()) / 1000);
    text = `retrying in ${formatDuration(wait)}` + (d.last_error ? `: ${d.last_error.code}: ${d.last_error.message}` : "");
    kind = "warn";
  } else if (running && d.eta_seconds !== null) {
    text = `${formatDuration(d.eta_seconds)} left`;
  }
  // Mirrors: how many sources agree, and why any was dropped.
  if (!kind && d.mirrors && d.mirrors.length) {
    const agreeing = 1 + d.mirrors.filter((m) => m.state !== "dropped").length;
    const dropped = d.mirrors.filter((m) => m.state === "dropped");
    text += `${text ? "; " : ""}${agreeing} of ${d.mirrors.length + 1} sources`
      + (dropped.length ? ` (dropped: ${dropped.map((m) => m.reason).join("; ")})` : "");
  }
  if (info.textContent !== text) {
    info.textContent = text;
    info.title = text;
  }
  info.dataset.kind = kind;
  row.querySelector(".select").checked = state.selected.has(d.id);
  row.querySelector(".pause").hidden = !(running || d.state === "queued");
  row.querySelector(".resume").hidden = d.state !== "paused";
  row.querySelector(".retry").hidden = d.state !== "failed";
  row.querySelector(".delete").hidden = !done;
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
  $("totals").textContent = `${count.toLocaleString("en")} download${count === 1 ? "" : "s"}, ${running} running`
    + (speed > 0 ? `, ${formatBytes(speed)}/s` : "");
}

// The free space of the download root, from /stats: what downloads may still write (the reserve left out).
async function loadDisk() {
  try {
    const disk = (await api("GET", "/stats")).disk;
    $("disk").textContent = disk ? `${formatBytes(disk.usable_bytes)} free for downloads` : "";
  } catch {
    // The connection line already says when the server cannot be reached.
  }
}

function renderSelection() {
  for (const id of [...state.selected]) if (!state.downloads.has(id)) state.selected.delete(id);
  const count = state.selected.size;
  $("selection").hidden = count === 0;
  $("selection-count").textContent = `${count.toLocaleString("en")} selected`;
  const all = $("select-all");
  const shownSelected = state.shown.filter((d) => state.selected.has(d.id)).length;
  all.checked = state.shown.length > 0 && shownSelected === state.shown.length;
  all.indeterminate = shownSelected > 0 && shownSelected < state.shown.length;
}

/** Pauses, resumes or removes every selected download in one request. */
async function bulk(action) {
  const ids = [...state.selected];
  if (!ids.length) return;
  const buttons = document.querySelectorAll("#selection button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const answer = await api("POST", "/downloads/actions", { action, ids });
    const failed = answer.results.filter((r) => r.status >= 400);
    for (const result of answer.results) {
      if (result.download) remember(result.download);
      if (action === "remove" && result.status === 204) forget(result.id);
    }
    $("selection-problem").textContent = failed.length
      ? `${failed.length} could not be changed: ${problemText(failed[0].problem)}` : "";
    if (action === "remove") for (const result of answer.results) state.selected.delete(result.id);
  } catch (error) {
    $("selection-problem").textContent = error.message;
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
    scheduleRender();
  }
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

/** Sizes as people write them, as the server and the CLI read them: 500k, 1.5M, 10MB (powers of 1024). */
function parseSize(text) {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  if (!match) return null;
  const power = { "": 0, k: 1, m: 2, g: 3, t: 4 }[match[2].toLowerCase()];
  const bytes = Number(match[1]) * 1024 ** power;
  return power === 0 && !Number.isInteger(bytes) ? null : Math.floor(bytes);
}

// MARK: settings

function showSettings(settings) {
  const input = (id, value, fallback) => {
    $(id).value = value === fallback ? "" : String(value);
    $(id).placeholder = `default ${fallback}`;
  };
  const defaults = settings.defaults;
  input("set-max-active", settings.max_active, defaults.max_active);
  $("set-max-speed").value = settings.max_speed === defaults.max_speed ? "" : sizeText(settings.max_speed);
  $("set-max-speed").placeholder = `default ${sizeText(defaults.max_speed)}`;
  input("set-connections", settings.default_connections, defaults.default_connections);
  input("set-per-host", settings.max_connections_per_host, defaults.max_connections_per_host);
  // Shown with its password as ***: saved again only when changed, so the stored password stays.
  input("set-proxy", settings.proxy, defaults.proxy);
  $("set-proxy").dataset.shown = $("set-proxy").value;
  $("schedule").replaceChildren(...settings.speed_schedule.map(windowRow));
  $("limit").textContent = settings.current_max_speed
    ? `limit ${formatBytes(settings.current_max_speed)}/s` : "";
}

/** A speed for an input, exactly (2M, 1536k, 1000): what is saved again reads back the same. */
function sizeText(bytes) {
  if (bytes === 0) return "none";
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)}M`;
  if (bytes % 1024 === 0) return `${bytes / 1024}k`;
  return String(bytes);
}

function windowRow(window) {
  const row = $("window-template").content.firstElementChild.cloneNode(true);
  const days = window ? window.days : DAYS;
  for (const box of row.querySelectorAll(".days input")) box.checked = days.includes(box.value);
  row.querySelector(".from").value = window ? window.from : "";
  row.querySelector(".to").value = window ? window.to : "";
  row.querySelector(".speed").value = window ? sizeText(window.max_speed) : "";
  row.querySelector(".remove-window").addEventListener("click", () => row.remove());
  return row;
}

async function loadSettings() {
  try {
    showSettings(await api("GET", "/settings"));
  } catch (error) {
    $("settings-problem").textContent = error.message;
  }
}

/** The form as a PATCH body: an empty field puts a setting back to its default (null). */
function settingsBody() {
  const number = (id) => ($(id).value.trim() === "" ? null : Number($(id).value));
  const speed = (text) => {
    const value = text.trim().toLowerCase();
    if (value === "") return null;
    if (value === "none" || value === "0") return 0;
    const bytes = parseSize(value);
    if (bytes === null) throw new Error(`'${text}' is not a speed like 500k or 2M`);
    return bytes;
  };
  const schedule = [...$("schedule").children].map((row) => ({
    days: [...row.querySelectorAll(".days input:checked")].map((box) => box.value),
    from: row.querySelector(".from").value.trim(),
    to: row.querySelector(".to").value.trim(),
    max_speed: speed(row.querySelector(".speed").value) || 0,
  }));
  const body = {
    max_active: number("set-max-active"),
    max_speed: speed($("set-max-speed").value),
    default_connections: number("set-connections"),
    max_connections_per_host: number("set-per-host"),
    speed_schedule: schedule,
  };
  const proxy = $("set-proxy").value.trim();
  if (proxy !== $("set-proxy").dataset.shown) body.proxy = proxy === "" ? null : proxy;
  return body;
}

// MARK: webhooks

async function loadWebhooks() {
  try {
    const { webhooks } = await api("GET", "/webhooks");
    const list = $("webhook-list");
    list.replaceChildren();
    for (const hook of webhooks) {
      const item = document.createElement("li");
      const text = document.createElement("span");
      text.className = "grow";
      text.textContent = `${hook.url}: ${hook.events.join(", ")}${hook.category ? ` (category ${hook.category})` : ""}`;
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "Remove";
      remove.setAttribute("aria-label", `Remove the webhook to ${hook.url}`);
      remove.addEventListener("click", async () => {
        try {
          await api("DELETE", `/webhooks/${hook.id}`);
          loadWebhooks();
        } catch (error) {
          $("webhook-problem").textContent = error.message;
        }
      });
      item.append(text, remove);
      list.append(item);
    }
    if (!webhooks.length) list.textContent = "No webhooks.";
  } catch (error) {
    $("webhook-problem").textContent = error.message;
  }
}

$("webhooks-panel").addEventListener("toggle", () => {
  if ($("webhooks-panel").open) loadWebhooks();
});

$("webhook-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = {
    url: $("webhook-url").value.trim(),
    events: [...$("webhook-events").querySelectorAll("input:checked")].map((box) => box.value),
  };
  const category = $("webhook-category").value.trim();
  if (category) body.category = category;
  try {
    const hook = await api("POST", "/webhooks", body);
    $("webhook-problem").textContent = "";
    $("webhook-secret").textContent = `Added. Its secret, shown this once: ${hook.secret}`;
    $("webhook-url").value = "";
    loadWebhooks();
  } catch (error) {
    $("webhook-secret").textContent = "";
    $("webhook-problem").textContent = error.message;
  }
});

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

/**
 * The options that stay from one add to the next, said beside "Options" so that a collapsed panel hides none of
 * them; the name and checksum are one URL's and are cleared after each add.
 */
function showStickyOptions() {
  const shown = [];
  if ($("start_paused").checked) shown.push("start paused");
  if ($("category").value.trim()) shown.push(`category ${$("category").value.trim()}`);
  if ($("directory").value.trim()) shown.push(`in ${$("directory").value.trim()}`);
  if ($("connections").value.trim()) shown.push(`${$("connections").value.trim()} connections`);
  if ($("max_speed").value.trim()) shown.push(`at most ${$("max_speed").value.trim()}/s`);
  if ($("proxy").value.trim()) shown.push(`proxy ${$("proxy").value.trim().replace(/:[^:@/]*@/, ":***@")}`);
  if ($("username").value.trim()) shown.push(`as ${$("username").value.trim()}`);
  if ($("cookies").value.trim()) shown.push("cookies");
  if ($("referer").value.trim()) shown.push("referer");
  if ($("user_agent").value.trim()) shown.push("user agent");
  for (const field of ["filename", "checksum"]) {
    if ($(field).value.trim()) shown.push(field === "filename" ? `named ${$(field).value.trim()}` : "checksum");
  }
  $("options-summary").textContent = shown.length ? `(${shown.join(", ")})` : "";
}
for (const id of ["filename", "directory", "category", "connections", "max_speed", "checksum", "proxy", "username",
                  "password", "cookies", "referer", "user_agent", "start_paused"]) {
  $(id).addEventListener("input", showStickyOptions);
  $(id).addEventListener("change", showStickyOptions);
}

/** Adds the URLs of the box, one a line, as one batch; the lines refused stay in the box with their reasons. */
$("add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const lines = $("urls").value.split("\n").map((line) => line.trim()).filter((line) => line && !line.startsWith("#"));
  if (!lines.length) return;
  if (lines.length > 1 && ($("filename").value.trim() || $("checksum").value.trim())) {
    $("add-problem").textContent = "A file name and a checksum are one URL's: add one URL with them, or clear them.";
    return;
  }
  const options = {};
  for (const field of ["filename", "directory", "category", "checksum", "proxy", "username", "password", "cookies",
                       "referer", "user_agent"]) {
    const value = $(field).value.trim();
    if (value) options[field] = value;
  }
  const connections = $("connections").value.trim();
  if (connections) options.connections = Number(connections);
  const button = $("add");
  button.disabled = true;
  try {
    const speed = $("max_speed").value.trim();
    if (speed) {
      const bytes = parseSize(speed);
      if (bytes === null) throw new Error(`max speed: '${speed}' is not a speed like 500k or 2M`);
      options.max_speed = bytes;
    }
    if ($("start_paused").checked) options.start_paused = true;
    if (lines.length === 1) {
      remember(await api("POST", "/downloads", { url: lines[0], ...options }));
      $("urls").value = "";
      $("add-problem").textContent = "";
      clearOneURLOptions();
    } else {
      const answer = await api("POST", "/downloads", { downloads: lines.map((url) => ({ url, ...options })) });
      const refused = [];
      answer.results.forEach((result, index) => {
        if (result.download) remember(result.download);
        else refused.push({ line: lines[index], reason: problemText(result.problem) });
      });
      $("urls").value = refused.map((r) => r.line).join("\n");
      $("add-problem").textContent = refused.map((r) => `${r.line}: ${r.reason}`).join("\n");
      if (refused.length < lines.length) clearOneURLOptions();
    }
  } catch (error) {
    $("add-problem").textContent = error.message;
  } finally {
    button.disabled = false;
  }
});

/** The name and checksum were that URL's: the next one gets its own. */
function clearOneURLOptions() {
  $("filename").value = "";
  $("checksum").value = "";
  showStickyOptions();
}

$("settings-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("settings-saved").textContent = "";
  try {
    showSettings(await api("PATCH", "/settings", settingsBody()));
    $("settings-problem").textContent = "";
    $("settings-saved").textContent = "Saved.";
  } catch (error) {
    $("settings-problem").textContent = error.message;
  }
});
$("add-window").addEventListener("click", () => $("schedule").appendChild(windowRow(null)));

for (const id of ["filter", "sort"]) $(id).addEventListener("change", render);
$("search").addEventListener("input", scheduleRender);
$("viewport").addEventListener("scroll", () => {
  if (state.windowQueued) return;
  state.windowQueued = true;
  requestAnimationFrame(() => {
    state.windowQueued = false;
    renderWindow();
  });
});
$("select-all").addEventListener("change", (event) => {
  for (const d of state.shown) if (event.target.checked) state.selected.add(d.id); else state.selected.delete(d.id);
  renderWindow();
  renderSelection();
});
$("bulk-pause").addEventListener("click", () => bulk("pause"));
$("bulk-resume").addEventListener("click", () => bulk("resume"));
$("bulk-remove").addEventListener("click", () => bulk("remove"));
$("bulk-clear").addEventListener("click", () => {
  state.selected.clear();
  scheduleRender();
});
$("clear-completed").addEventListener("click", async () => {
  try {
    const answer = await api("POST", "/downloads/actions", { action: "remove", state: ["completed"] });
    for (const result of answer.results) if (result.status === 204) forget(result.id);
    $("selection-problem").textContent = "";
  } catch (error) {
    $("selection-problem").textContent = error.message;
  }
});

function applyDensity() {
  document.body.dataset.density = state.density;
  $("density").setAttribute("aria-pressed", String(state.density === "compact"));
  $("density").textContent = state.density === "compact" ? "Comfortable" : "Compact";
}
$("density").addEventListener("click", () => {
  state.density = state.density === "compact" ? "comfortable" : "compact";
  localStorage.setItem(DENSITY_KEY, state.density);
  applyDensity();
  render();
});
applyDensity();

// A wait to retry counts down without an event: the rows on screen are redrawn each second while one waits.
setInterval(() => {
  if (state.shown.some(isRetrying)) renderWindow();
}, 1000);

setInterval(loadDisk, 30000);

start();
