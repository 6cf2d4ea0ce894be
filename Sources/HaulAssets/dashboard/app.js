// Haul's dashboard: the REST API for actions, server-sent events for changes. No framework, no build step.
"use strict";

const TOKEN_KEY = "haul.token";
const DENSITY_KEY = "haul.density";
const ACTIVE = new Set(["probing", "downloading", "verifying"]);
const WAITING = new Set(["queued", "paused"]);
const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
// Rows are drawn only where the list is scrolled to: 10,000 downloads cost the page the rows on screen.
const ROW_HEIGHT = { comfortable: 44, compact: 28 };
const OVERSCAN = 8;
// A category filter's value for the downloads of none (no category name starts with "-").
const NO_CATEGORY = "-";
// The stream may blink (a proxy's timeout): the server is called unreachable once it stayed away this long.
const OFFLINE_GRACE_MS = 1500;

const state = {
  token: localStorage.getItem(TOKEN_KEY) || "",
  downloads: new Map(), // id -> download resource, as the API last described it
  lastEventId: null,    // the id of the last event applied; a new stream resumes after it
  source: null,
  retryDelay: 1000,
  renderQueued: false,
  windowQueued: false,
  shown: [],            // the downloads the filters, search and sort give, in order
  rendered: new Map(),  // id -> row element on screen
  pool: [],             // row elements off screen, for reuse
  selected: new Set(),
  density: localStorage.getItem(DENSITY_KEY) === "compact" ? "compact" : "comfortable",
  categories: [],       // as GET /categories lists them
  webhooks: new Map(),  // id -> webhook, once the webhooks were listed
  online: true,         // whether the server answered lately; false: the rows are what was last known
  offlineTimer: null,
  lastContact: null,
  detail: null,         // the id of the download the details show
  menuFor: null,        // the id of the download the row menu is open for
  scroll: new Map(),    // a list view's key -> its scroll position
  viewKey: "",
};

const $ = (id) => document.getElementById(id);

// MARK: API

class Problem extends Error {
  constructor(status, body) {
    super(problemText(body) || `HTTP ${status}`);
    this.status = status;
  }
}

/** The server did not answer at all: nothing was done. */
class Offline extends Error {
  constructor() {
    super("cannot reach the Haul server: nothing was done; try again once it is back");
    this.offline = true;
  }
}

/** A problem document as one line: its fields' messages, else its detail or title. */
function problemText(body) {
  if (!body) return "";
  const fields = (body.errors || []).map((e) => `${e.field}: ${e.message}`);
  return fields.length ? fields.join("; ") : body.detail || body.title || "";
}

async function api(method, path, body) {
  return (await apiAnswer(method, path, body)).data;
}

/** The server's answer with its status (200 and 201 tell a download already in the list from a new one). */
async function apiAnswer(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store",
    });
  } catch {
    // The browser's "Failed to fetch": no answer came.
    goneOffline();
    throw new Offline();
  }
  contact();
  const type = response.headers.get("Content-Type") || "";
  const data = type.includes("json") ? await response.json() : null;
  if (response.status === 401) {
    askForToken(state.token ? "That token was not accepted." : "");
  }
  if (!response.ok) throw new Problem(response.status, data);
  return { status: response.status, data };
}

// MARK: reaching the server

/** The server answered: it is reachable. */
function contact() {
  state.lastContact = new Date();
  clearTimeout(state.offlineTimer);
  state.offlineTimer = null;
  if (!state.online) setOnline(true);
}

/** The server did not answer: after a grace period the page says so and marks what it shows as stale. */
function goneOffline(now = false) {
  if (!state.online || state.offlineTimer) return;
  if (now) {
    setOnline(false);
    return;
  }
  state.offlineTimer = setTimeout(() => {
    state.offlineTimer = null;
    setOnline(false);
  }, OFFLINE_GRACE_MS);
}

function setOnline(online) {
  state.online = online;
  document.body.dataset.stale = String(!online);
  $("banner").hidden = online;
  if (!online) {
    $("banner-detail").textContent = state.lastContact
      ? `Last heard from at ${state.lastContact.toLocaleTimeString()}; what the list shows may be out of date.` : "";
    pollUntilBack();
  } else {
    // Problems that only said the server was away are gone with it.
    for (const [id, problem] of problems) if (problem.offline) problems.delete(id);
    for (const id of ["list-problem", "detail-problem", "add-problem", "settings-problem", "webhook-problem",
                      "category-problem"]) {
      if ($(id).dataset.offline === "true") showProblem(id, "");
    }
  }
  scheduleRender();
}

/** While the server is away: ask /healthz every two seconds, which says when it is back. */
function pollUntilBack() {
  setTimeout(async () => {
    if (state.online) return;
    try {
      const response = await fetch("/healthz", { cache: "no-store" });
      if (response.ok) {
        contact();
        if (!state.source || state.source.readyState === EventSource.CLOSED) follow();
        return;
      }
    } catch {
      // Still away.
    }
    pollUntilBack();
  }, 2000);
}

/** Shows a problem under a form (or clears it); one that only says the server is away is cleared when it is back. */
function showProblem(id, error) {
  const element = $(id);
  element.textContent = typeof error === "string" ? error : error.message;
  element.dataset.offline = String(Boolean(error && error.offline));
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
    await loadScope();
    render();
    follow();
    loadSettings();
    loadCategories();
    loadDisk();
  } catch (error) {
    if (error.status === 401) return; // waits for the token form
    setConnection("down", error.offline ? "" : error.message);
    retryLater();
  }
}

/**
 * The scope of the token in use (read, add, manage or admin), on <body data-scope>: the stylesheet hides the
 * buttons it cannot use, so a wall dashboard with a read-only token shows no Pause that would answer 403.
 */
async function loadScope() {
  document.body.dataset.hasToken = String(Boolean(state.token));
  try {
    const me = await api("GET", "/token");
    state.me = me;
    document.body.dataset.scope = me.scope;
    document.body.dataset.confined = me.root ? "true" : "false";
  } catch (error) {
    if (error.status === 401) throw error;
    state.me = null;
    delete document.body.dataset.scope;
  }
}

/** Whether the token in use reaches `scope` (read < add < manage < admin); without a token, everything. */
function mayUse(scope) {
  const order = ["read", "add", "manage", "admin"];
  const mine = document.body.dataset.scope;
  return !mine || order.indexOf(mine) >= order.indexOf(scope);
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
    setConnection("down", error.offline ? "" : error.message);
    retryLater();
    return;
  }
  const source = new EventSource(url);
  state.source = source;
  source.onopen = () => {
    state.retryDelay = 1000;
    setConnection("live");
    contact();
  };
  const track = (event) => {
    if (event.lastEventId) state.lastEventId = event.lastEventId;
    // An event is word from the server as much as an answer is: "last heard" counts it.
    contact();
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
    goneOffline();
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
  if (state.detail === id) closeDetail();
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

/** The scheme of a download's URL, lower case ("https", "sftp", ...), "hls" for a playlist's segments, or
 *  "torrent" for BitTorrent. */
function schemeOf(d) {
  if (d.kind === "hls") return "hls";
  if (d.kind === "torrent") return "torrent";
  const colon = d.url.indexOf(":");
  return colon > 0 ? d.url.slice(0, colon).toLowerCase() : "";
}

function displayName(d) {
  if (d.filename) return d.filename;
  if (d.kind === "torrent") {
    const name = d.torrent && d.torrent.name;
    const dn = /[?&]dn=([^&]*)/.exec(d.url);
    try {
      return name || (dn && decodeURIComponent(dn[1].replace(/\+/g, " "))) || "torrent";
    } catch {
      return "torrent";
    }
  }
  try {
    return decodeURIComponent(new URL(d.url).pathname.split("/").pop() || "") || d.url;
  } catch {
    return d.url;
  }
}

const isRetrying = (d) => Boolean(d.next_attempt_at);

function matchesState(d, filter) {
  if (!filter) return true;
  if (filter === "active") return ACTIVE.has(d.state);
  if (filter === "retrying") return isRetrying(d);
  return d.state === filter;
}

function matchesCategory(d, category) {
  if (!category) return true;
  return category === NO_CATEGORY ? !d.category : d.category === category;
}

function matches(d, filter, category, search) {
  return matchesState(d, filter) && matchesCategory(d, category)
    && (!search || displayName(d).toLowerCase().includes(search) || d.url.toLowerCase().includes(search));
}

/** The comparison of `sort` ("name", "-size", "queue", ...): ties in creation order, newest first. `rank` is each
 * download's place in creation order (the order the list and the events brought them in): a batch's downloads share
 * one created_at. */
function comparator(sort, rank) {
  if (sort === "queue") {
    // The order downloads start in: running ones, the waiting ones by priority and place, then the finished.
    const group = (d) => (ACTIVE.has(d.state) ? 0 : WAITING.has(d.state) ? 1 : 2);
    return (a, b) => group(a) - group(b) || (b.priority || 0) - (a.priority || 0)
      || (group(a) === 1 ? (a.queue_order || 0) - (b.queue_order || 0) : 0) || rank.get(a.id) - rank.get(b.id);
  }
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
  const category = $("category-filter").value;
  const search = $("search").value.trim().toLowerCase();
  const sort = $("sort").value;
  const shown = [];
  const rank = new Map();
  const counts = { all: 0, active: 0, retrying: 0 };
  const byCategory = new Map([[NO_CATEGORY, 0]]);
  for (const d of state.downloads.values()) {
    rank.set(d.id, rank.size);
    counts.all += 1;
    counts[d.state] = (counts[d.state] || 0) + 1;
    if (ACTIVE.has(d.state)) counts.active += 1;
    if (isRetrying(d)) counts.retrying += 1;
    const key = d.category || NO_CATEGORY;
    byCategory.set(key, (byCategory.get(key) || 0) + 1);
    if (matches(d, filter, category, search)) shown.push(d);
  }
  shown.sort(comparator(sort, rank));
  state.shown = shown;
  $("spacer").style.height = `${shown.length * ROW_HEIGHT[state.density]}px`;
  restoreScroll(`${filter}|${category}|${search}|${sort}`);
  renderWindow();
  $("empty").hidden = shown.length > 0;
  $("empty").textContent = state.downloads.size ? "Nothing matches." : "No downloads yet.";
  renderTotals(counts);
  renderFilters(counts, byCategory);
  renderSelection();
  if (state.detail) renderDetail();
}

/** Each list view (filter, category, search, order) keeps its own scroll position. */
function restoreScroll(key) {
  if (key === state.viewKey) return;
  state.viewKey = key;
  $("viewport").scrollTop = state.scroll.get(key) || 0;
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
  row.querySelector(".pause").addEventListener("click", () => perform(id(), "pause", row));
  row.querySelector(".resume").addEventListener("click", () => perform(id(), "resume", row));
  row.querySelector(".retry").addEventListener("click", () => perform(id(), "retry", row));
  row.querySelector(".more").addEventListener("click", (event) => {
    event.stopPropagation();
    openMenu(id(), event.currentTarget);
  });
  row.querySelector(".file").addEventListener("click", (event) => {
    event.stopPropagation();
    if (!state.token) return; // the link works as it is
    event.preventDefault();
    const target = id();
    act(target, async () => { window.location.assign(await ticketed(`/downloads/${target}/file`)); });
  });
  row.querySelector(".select").addEventListener("click", (event) => event.stopPropagation());
  row.querySelector(".select").addEventListener("change", (event) => {
    if (event.target.checked) state.selected.add(id()); else state.selected.delete(id());
    renderSelection();
  });
  // A click anywhere else on the row opens its details.
  row.addEventListener("click", (event) => {
    if (event.target.closest("button, a, input")) return;
    openDetail(id());
  });
  return row;
}

/**
 * Runs an action on one download, showing its problem in its row (and the details) until the next action on it;
 * the event stream shows its effect.
 */
async function act(id, action) {
  try {
    const result = await action();
    if (result && result.id) remember(result);
    problems.delete(id);
  } catch (error) {
    problems.set(id, { message: error.message, offline: Boolean(error.offline) });
  } finally {
    scheduleRender();
  }
}

/** An action's problem for a download, shown in its row until the next action on it. */
const problems = new Map();

/** What a row's buttons, its menu and the details do to a download. */
async function perform(id, action, row) {
  const d = state.downloads.get(id);
  if (!d) return;
  const buttons = row ? [...row.querySelectorAll("button")] : [];
  buttons.forEach((b) => { b.disabled = true; });
  const patch = (body) => act(id, () => api("PATCH", `/downloads/${id}`, body));
  try {
    switch (action) {
      case "pause": await patch({ state: "paused" }); break;
      case "resume":
      case "retry": await patch({ state: "queued" }); break;
      case "details": openDetail(id); break;
      case "remove":
      case "delete": {
        const deleteFile = action === "delete";
        if (deleteFile) {
          const answer = await confirmAction({
            title: "Remove the download and its file?",
            text: `${displayName(d)} is removed from the list and its file ${d.path || ""} is deleted from the disk.`,
            ok: "Remove + file",
          });
          if (!answer.ok) break;
        }
        await act(id, async () => {
          await api("DELETE", `/downloads/${id}${deleteFile ? "?delete_file=true" : ""}`);
          forget(id);
        });
        break;
      }
      default: break;
    }
  } finally {
    buttons.forEach((b) => { b.disabled = false; });
  }
}

/** Moves a waiting download in the queue: to the top, up, down or to the bottom. */
function move(id, to) {
  return act(id, async () => {
    const answer = await api("POST", "/downloads/actions", { action: "move", to, ids: [id] });
    const result = answer.results[0];
    if (result.problem) throw new Problem(result.status, result.problem);
    return result.download;
  });
}

/** The text of a size cell: "unknown" for a size the server has not told. */
function sizeText(d) {
  if (d.total_bytes === null && d.hls && d.hls.segments_total) {
    // A playlist's size is known at its end: its segments say how far it is, and its size is estimated.
    const size = d.hls.size ? ` of ${d.hls.size_estimated ? "about " : ""}${formatBytes(d.hls.size)}` : "";
    return `${formatBytes(d.received_bytes)}${size}, segment ${d.hls.segments_done} of ${d.hls.segments_total}`;
  }
  if (d.total_bytes === null) {
    return d.received_bytes > 0 ? `${formatBytes(d.received_bytes)} of unknown` : "size unknown";
  }
  if (d.received_bytes >= d.total_bytes) return formatBytes(d.total_bytes);
  return `${formatBytes(d.received_bytes)} of ${formatBytes(d.total_bytes)}`;
}

/** What the info column says: an action's problem, the error, a wait to retry, the time left, the sources. */
function infoOf(d) {
  const running = ACTIVE.has(d.state);
  let text = "";
  let kind = "";
  if (problems.has(d.id)) {
    text = problems.get(d.id).message;
    kind = "problem";
  } else if (d.error) {
    text = `${d.error.code}: ${d.error.message}`;
    kind = "problem";
  } else if (isRetrying(d)) {
    // A countdown from a server that is away would count to nothing.
    const wait = Math.max(0, (Date.parse(d.next_attempt_at) - Date.now()) / 1000);
    text = (state.online ? `retrying in ${formatDuration(wait)}` : "was waiting to retry")
      + (d.last_error ? `: ${d.last_error.code}: ${d.last_error.message}` : "");
    kind = "warn";
  } else if (running && d.eta_seconds !== null && state.online) {
    text = `${formatDuration(d.eta_seconds)} left`;
  }
  // Mirrors: how many sources agree, and why any was dropped.
  if (!kind && d.mirrors && d.mirrors.length) {
    const agreeing = 1 + d.mirrors.filter((m) => m.state !== "dropped").length;
    const dropped = d.mirrors.filter((m) => m.state === "dropped");
    text += `${text ? "; " : ""}${agreeing} of ${d.mirrors.length + 1} sources`
      + (dropped.length ? ` (dropped: ${dropped.map((m) => m.reason).join("; ")})` : "");
  }
  return { text, kind };
}

function update(row, d) {
  const set = (selector, text) => {
    const element = row.querySelector(selector);
    if (element.textContent !== text) element.textContent = text;
  };
  const name = displayName(d);
  row.dataset.state = d.state;
  row.dataset.name = name;
  row.classList.toggle("retrying", isRetrying(d));
  row.setAttribute("aria-current", String(state.detail === d.id));
  set(".label", name);
  set(".scheme", schemeOf(d));
  const link = row.querySelector(".file");
  const done = d.state === "completed";
  link.hidden = !done;
  if (done) {
    // With a token the click fetches a ticket first; the href itself carries no credential.
    const href = `/downloads/${d.id}/file`;
    if (link.getAttribute("href") !== href) link.setAttribute("href", href);
    if (link.textContent !== name) link.textContent = name;
  }
  row.querySelector(".label").hidden = done;
  row.querySelector(".name").title = `${d.path || name}\n${d.url}`;
  const badge = row.querySelector(".state");
  badge.dataset.state = d.state;
  badge.dataset.retrying = String(isRetrying(d));
  set(".state", isRetrying(d) ? "retrying" : d.state);
  const fill = row.querySelector(".fill");
  fill.dataset.state = d.state;
  const known = typeof d.progress === "number";
  const running = ACTIVE.has(d.state);
  fill.classList.toggle("unknown", !known && running);
  fill.style.width = known ? `${(d.progress * 100).toFixed(1)}%` : "";
  set(".percent", known ? `${Math.floor(d.progress * 100)}%` : "");
  set(".size", sizeText(d));
  // A speed is only what the server says now: a stale row shows none.
  set(".speed", running && d.speed > 0 && state.online ? `${formatBytes(d.speed)}/s` : "");
  set(".category", d.category || "");
  const info = row.querySelector(".info");
  const { text, kind } = infoOf(d);
  if (info.textContent !== text) {
    info.textContent = text;
    info.title = text;
  }
  info.dataset.kind = kind;
  row.querySelector(".select").checked = state.selected.has(d.id);
  row.querySelector(".pause").hidden = !(running || d.state === "queued");
  row.querySelector(".resume").hidden = d.state !== "paused";
  row.querySelector(".retry").hidden = d.state !== "failed";
}

// MARK: the row menu

function openMenu(id, anchor) {
  const d = state.downloads.get(id);
  if (!d) return;
  const menu = $("row-menu");
  state.menuFor = id;
  const running = ACTIVE.has(d.state);
  const show = {
    details: true,
    pause: running || d.state === "queued",
    resume: d.state === "paused",
    retry: d.state === "failed",
    remove: true,
    delete: d.state === "completed",
  };
  for (const button of menu.querySelectorAll("[data-action]")) button.hidden = !show[button.dataset.action];
  for (const button of menu.querySelectorAll("[data-move]")) button.hidden = !WAITING.has(d.state);
  menu.hidden = false;
  const box = anchor.getBoundingClientRect();
  const width = menu.offsetWidth;
  const height = menu.offsetHeight;
  menu.style.left = `${Math.max(4, Math.min(box.right - width, window.innerWidth - width - 4))}px`;
  const below = box.bottom + 4;
  menu.style.top = `${below + height > window.innerHeight ? Math.max(4, box.top - height - 4) : below}px`;
  menu.querySelector("button:not([hidden])").focus();
}

function closeMenu() {
  $("row-menu").hidden = true;
  state.menuFor = null;
}

$("row-menu").addEventListener("click", (event) => {
  const button = event.target.closest("button");
  const id = state.menuFor;
  closeMenu();
  if (!button || !id) return;
  if (button.dataset.move) move(id, button.dataset.move);
  else perform(id, button.dataset.action, state.rendered.get(id));
});
document.addEventListener("click", (event) => {
  if (!$("row-menu").hidden && !event.target.closest("#row-menu, .more")) closeMenu();
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  if (!$("row-menu").hidden) closeMenu();
  else if (state.detail && !document.querySelector("dialog[open]")) closeDetail();
});
$("viewport").addEventListener("scroll", closeMenu, { passive: true });

// MARK: the details of one download

function openDetail(id) {
  if (state.detail !== id) stopPlayer();
  state.detail = id;
  $("detail").hidden = false;
  $("detail").dataset.id = id;
  const d = state.downloads.get(id);
  if (d) fillDetailForm(d);
  showProblem("detail-problem", "");
  loadDeliveries(id);
  renderDetail();
  scheduleRender();
}

function closeDetail() {
  stopPlayer();
  state.detail = null;
  $("detail").hidden = true;
  scheduleRender();
}

// MARK: using a file while it downloads

const MEDIA = /\.(mp4|m4v|webm|mkv|mov|ogv|mp3|m4a|aac|ogg|oga|opus|flac|wav)$/i;

/** Whether the download is something the browser plays: by its type, else by its name. */
function isMedia(d) {
  // MPEG-TS (an HLS download's .ts) is no browser's: it is opened, not played.
  if (/^video\/mp2t/i.test(d.content_type || "")) return false;
  if (/^(video|audio)\//i.test(d.content_type || "")) return true;
  return MEDIA.test(d.path || "");
}

/** Play (a video or audio file) or Open (anything else), finished or not: the file route answers what is on disk
 *  and the rest as it lands, fetching what the player asks for first. */
function renderUse(d) {
  const some = d.state === "completed" || d.contiguous_bytes > 0 || ACTIVE.has(d.state);
  $("detail-use").hidden = !some;
  $("detail-play").hidden = !isMedia(d);
  $("detail-open").hidden = d.state === "completed" || isMedia(d);
  $("detail-use-note").textContent = d.state === "completed" ? ""
    : ACTIVE.has(d.state) && d.kind === "hls" ? "while it downloads: as it arrives, in order"
    : ACTIVE.has(d.state) ? "while it downloads: what you ask for is fetched first"
    : "what is on disk so far";
}

/** The file's URL for the player or a new tab: shown where the browser can, with a ticket when the server has a
 *  token (a ticket opens it for a minute; the player asks again when one ran out). */
async function fileURL(id) {
  return ticketed(`/downloads/${id}/file`, new URLSearchParams({ download: "0" }));
}

async function play() {
  const id = state.detail;
  const video = $("detail-video");
  video.hidden = false;
  video.dataset.id = id;
  video.src = await fileURL(id);
  video.play().catch(() => {});
}

function stopPlayer() {
  const video = $("detail-video");
  if (video.hidden) return;
  video.pause();
  video.removeAttribute("src");
  video.load();
  video.hidden = true;
}

$("detail-play").addEventListener("click", () => act(state.detail, play));
$("detail-open").addEventListener("click", () => {
  const id = state.detail;
  act(id, async () => {
    // In a tab of its own, within the click's moment (the ticket is quick to get).
    const link = document.createElement("a");
    link.href = await fileURL(id);
    link.target = "_blank";
    link.rel = "noopener";
    link.click();
  });
});
// A ticket that ran out (or a read the server ended while the download waited): asked again where it was.
$("detail-video").addEventListener("error", async () => {
  const video = $("detail-video");
  const id = video.dataset.id;
  if (video.hidden || id !== state.detail || !video.getAttribute("src")) return;
  const at = video.currentTime;
  video.src = await fileURL(id);
  video.currentTime = at;
  video.play().catch(() => {});
});

/** The form shows the download's values as values: what is set, not a hint. */
function fillDetailForm(d) {
  $("detail-max-speed").value = d.max_speed ? speedText(d.max_speed) : "";
  $("detail-connections").value = String(d.connections);
  $("detail-priority").value = String(d.priority);
}

function renderDetail() {
  const d = state.downloads.get(state.detail);
  if (!d) return;
  const running = ACTIVE.has(d.state);
  $("detail-name").textContent = displayName(d);
  $("detail-scheme").textContent = schemeOf(d);
  const badge = $("detail-state");
  badge.dataset.state = d.state;
  badge.dataset.retrying = String(isRetrying(d));
  badge.textContent = isRetrying(d) ? "retrying" : d.state;
  const known = typeof d.progress === "number";
  let progress = known ? `${Math.floor(d.progress * 100)}%, ` : "";
  progress += sizeText(d);
  if (running && d.speed > 0 && state.online) progress += `, ${formatBytes(d.speed)}/s`;
  if (running && d.eta_seconds !== null && state.online) progress += `, ${formatDuration(d.eta_seconds)} left`;
  if (!state.online) progress += " (last known: the server cannot be reached)";
  $("detail-progress-text").textContent = progress;
  const fill = $("detail-fill");
  fill.dataset.state = d.state;
  fill.classList.toggle("unknown", !known && running);
  fill.style.width = known ? `${(d.progress * 100).toFixed(1)}%` : "";
  const show = {
    pause: running || d.state === "queued",
    resume: d.state === "paused",
    retry: d.state === "failed",
    remove: true,
    delete: d.state === "completed",
  };
  for (const button of $("detail-actions").querySelectorAll("button")) button.hidden = !show[button.dataset.action];
  $("detail-queue").hidden = !WAITING.has(d.state);
  renderUse(d);
  // An action's problem shows until the next action on it; the form's own stay until it is saved again.
  if (problems.has(d.id)) {
    showProblem("detail-problem", problems.get(d.id));
    $("detail-problem").dataset.action = "true";
  } else if ($("detail-problem").dataset.action === "true") {
    showProblem("detail-problem", "");
    $("detail-problem").dataset.action = "false";
  }

  for (const field of $("detail-form").querySelectorAll("input")) field.disabled = !mayUse("add");
  const fields = [];
  const add = (label, value, kind) => { if (value !== null && value !== undefined && value !== "") fields.push([label, value, kind]); };
  add("URL", d.url);
  if (d.final_url && d.final_url !== d.url) add("Final URL", d.final_url);
  add("Path", d.path || "chosen once the server answers");
  add("Category", d.category || "none");
  if (d.tags) add("Tags", d.tags.split(",").join(", "));
  add("Priority", String(d.priority));
  add("Connections", `${d.active_connections} open of ${d.connections}`);
  add("Max speed", d.max_speed ? `${formatBytes(d.max_speed)}/s` : "no limit");
  // Known once the server has answered the first request (final_url is set then).
  add("Resumable", d.resumable ? "yes" : d.final_url === null && !["failed", "completed"].includes(d.state)
    ? "unknown until the server answers" : "no: the server gives no ranges, size or validator");
  if (d.error) add("Error", `${d.error.code}: ${d.error.message}`, "error");
  if (d.last_error && !d.error) add("Last error", `${d.last_error.code}: ${d.last_error.message}`, "error");
  if (d.next_attempt_at) add("Next attempt", formatTime(d.next_attempt_at));
  if (d.attempts > 1) add("Attempts", String(d.attempts));
  add("Checksum", d.checksum);
  add("Proxy", d.proxy);
  add("User", d.username);
  add("User agent", d.user_agent);
  add("Referer", d.referer);
  if (d.hls) {
    const v = d.hls.variant;
    add("HLS", `${d.hls.segments_done} of ${d.hls.segments_total} segments, ${formatDuration(d.hls.duration)} of`
      + ` ${d.hls.container === "mp4" ? "fMP4" : "MPEG-TS"}${d.hls.encrypted ? ", AES-128" : ""}`);
    if (v) {
      add("Variant", [v.name, v.resolution, `${formatBytes(v.bandwidth / 8)}/s`].filter(Boolean).join(", ")
        + ` (${d.variant ? `asked: ${d.variant}` : "the best"} of ${d.hls.variants})`);
    }
    if (d.hls.audio.length) {
      add("Audio", d.hls.audio.map((a) => a.name + (a.language ? ` (${a.language})` : "")
        + (a.default ? ", default" : "")).join("; "));
    }
  }
  if (d.torrent) {
    const t = d.torrent;
    add("Info-hash", t.info_hash);
    add("BitTorrent", `${t.phase}, ${t.peers} peer${t.peers === 1 ? "" : "s"} (${t.seeds} seeding)`
      + `, uploaded ${formatBytes(t.uploaded)} (ratio ${t.ratio.toFixed(2)})`
      + (t.upload_speed > 0 ? `, ${formatBytes(t.upload_speed)}/s up` : ""));
    if (t.pieces) add("Pieces", `${t.pieces_done} of ${t.pieces} (${formatBytes(t.piece_length)} each)`);
    if (t.files.length) {
      const shown = t.files.slice(0, 50).map((f) => `${f.path}: ${formatBytes(f.done)} of ${formatBytes(f.size)}`
        + (f.wanted ? "" : " (skipped)"));
      if (t.files.length > 50) shown.push(`and ${t.files.length - 50} more`);
      add(`Files (${t.files.length})`, shown.join("\n"));
    }
  }
  if (d.hook) {
    const how = d.hook.pending ? "due" : d.hook.status === 0 ? "ran"
      : d.hook.status !== null ? `exited ${d.hook.status}` : d.hook.error || "did not run";
    add("Hook", `${how}${d.hook.at && !d.hook.pending ? `, ${formatTime(d.hook.at)}` : ""}`,
      !d.hook.pending && d.hook.status !== 0 ? "error" : undefined);
  }
  if (d.completed_directory) add("Completed folder", d.moved ? `${d.completed_directory} (moved)` : d.completed_directory);
  if (d.move_error) add("Not moved", d.move_error, "error");
  add("Added", formatTime(d.created_at));
  add("Started", d.started_at && formatTime(d.started_at));
  add("Completed", d.completed_at && formatTime(d.completed_at));
  add("Changed", formatTime(d.updated_at));
  add("Node", d.node);
  const list = $("detail-fields");
  list.replaceChildren(...fields.flatMap(([label, value, kind]) => {
    const term = document.createElement("dt");
    term.textContent = label;
    const description = document.createElement("dd");
    description.textContent = value;
    if (kind) description.className = kind;
    return [term, description];
  }));

  const segments = $("detail-segments");
  if (!d.segments.length) {
    segments.textContent = d.state === "completed" ? "The file is complete." : "None yet: the server has not answered.";
  } else {
    const rows = d.segments.map((s) => {
      const row = document.createElement("div");
      row.className = "segment";
      const bar = document.createElement("span");
      bar.className = "bar";
      const fillSegment = document.createElement("span");
      fillSegment.className = "fill";
      const length = s.end === null ? null : s.end - s.start + 1;
      fillSegment.dataset.state = length !== null && s.received >= length ? "completed" : d.state;
      fillSegment.style.width = length ? `${Math.min(100, (s.received / length) * 100).toFixed(1)}%` : "0";
      bar.append(fillSegment);
      const text = document.createElement("span");
      text.className = "muted";
      text.textContent = length === null ? `${formatBytes(s.received)} from ${s.start}`
        : `${formatBytes(s.received)} of ${formatBytes(length)}`;
      text.title = `bytes ${s.start}-${s.end === null ? "" : s.end}`;
      row.append(bar, text);
      return row;
    });
    const container = document.createElement("div");
    container.className = "segments";
    container.append(...rows);
    segments.replaceChildren(container);
  }
  $("detail-mirrors-block").hidden = !d.mirrors.length;
  $("detail-mirrors").replaceChildren(...d.mirrors.map((m) => {
    const item = document.createElement("li");
    item.textContent = `${m.url}: ${m.state}${m.reason ? ` (${m.reason})` : ""}, ${formatBytes(m.received_bytes)}`
      + (m.speed > 0 ? `, ${formatBytes(m.speed)}/s` : "");
    return item;
  }));
}

/** What every webhook was sent about the download (admins only: another token gets 403 and sees none). */
async function loadDeliveries(id) {
  $("detail-deliveries-block").hidden = true;
  try {
    const { deliveries } = await api("GET", `/downloads/${id}/deliveries?limit=20`);
    if (state.detail !== id) return;
    if (!state.webhooks.size && deliveries.length) await loadWebhookList();
    $("detail-deliveries-block").hidden = !deliveries.length;
    $("detail-deliveries").replaceChildren(...deliveries.map((delivery) => {
      const item = document.createElement("li");
      const hook = state.webhooks.get(delivery.webhook_id);
      item.textContent = `${delivery.event} to ${hook ? hook.url : delivery.webhook_id}: ${delivery.state}`
        + (delivery.last_status ? `, HTTP ${delivery.last_status}` : "")
        + `, ${delivery.attempts} attempt${delivery.attempts === 1 ? "" : "s"}`
        + (delivery.last_attempt_at ? `, ${formatTime(delivery.last_attempt_at)}` : "")
        + (delivery.last_error ? ` (${delivery.last_error})` : "");
      return item;
    }));
  } catch {
    // Not this token's to see, or the server is away: the details go without.
  }
}

$("detail-close").addEventListener("click", closeDetail);
$("detail-actions").addEventListener("click", (event) => {
  const button = event.target.closest("button");
  if (button && state.detail) perform(state.detail, button.dataset.action, null);
});
$("detail-queue").addEventListener("click", (event) => {
  const button = event.target.closest("button");
  if (button && state.detail) move(state.detail, button.dataset.move);
});
$("detail-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const id = state.detail;
  const d = state.downloads.get(id);
  if (!d) return;
  const body = {};
  try {
    const speed = $("detail-max-speed").value.trim();
    const bytes = speed === "" || speed.toLowerCase() === "none" ? null : parseSize(speed);
    if (bytes === null && speed !== "" && speed.toLowerCase() !== "none") {
      throw new Error(`max speed: '${speed}' is not a speed like 500k or 2M`);
    }
    if ((bytes || null) !== (d.max_speed || null)) body.max_speed = bytes;
    const connections = Number($("detail-connections").value);
    if (connections !== d.connections) body.connections = connections;
    const priority = Number($("detail-priority").value);
    if (priority !== d.priority) body.priority = priority;
    if (!Object.keys(body).length) return;
    remember(await api("PATCH", `/downloads/${id}`, body));
    showProblem("detail-problem", "");
    fillDetailForm(state.downloads.get(id));
  } catch (error) {
    showProblem("detail-problem", error);
    $("detail-problem").dataset.action = "false";
  }
});

// MARK: totals, filters and the selection

function renderTotals(counts) {
  let speed = 0;
  for (const d of state.downloads.values()) if (ACTIVE.has(d.state)) speed += d.speed;
  const count = counts.all;
  $("totals").textContent = `${count.toLocaleString("en")} download${count === 1 ? "" : "s"}, ${counts.active} running`
    + (speed > 0 && state.online ? `, ${formatBytes(speed)}/s` : "");
}

/** The sidebar's states and categories, each with how many downloads it has; a click shows those. */
function renderFilters(counts, byCategory) {
  const filter = $("filter").value;
  const category = $("category-filter").value;
  const states = [["", "All", counts.all], ["active", "Running", counts.active], ["retrying", "Retrying", counts.retrying],
    ["queued", "Queued", counts.queued || 0], ["paused", "Paused", counts.paused || 0],
    ["seeding", "Seeding", counts.seeding || 0], ["completed", "Completed", counts.completed || 0],
    ["failed", "Failed", counts.failed || 0]];
  syncList($("state-filters"), states.map(([value, label, count]) => ({
    key: value, label, count, pressed: value === filter,
    pick: () => { $("filter").value = value; render(); },
  })));
  const names = new Set(state.categories.map((c) => c.name));
  for (const name of byCategory.keys()) if (name !== NO_CATEGORY) names.add(name);
  const categories = [{ key: "", label: "All", count: counts.all }]
    .concat([...names].sort().map((name) => ({ key: name, label: name, count: byCategory.get(name) || 0, edit: true })));
  if (byCategory.get(NO_CATEGORY)) categories.push({ key: NO_CATEGORY, label: "None", count: byCategory.get(NO_CATEGORY) });
  syncList($("category-filters"), categories.map((c) => ({
    ...c, pressed: c.key === category,
    pick: () => { $("category-filter").value = c.key; render(); },
  })));
  syncCategoryOptions($("category-filter"), [...names].sort(), "all", true);
  $("edit-category").hidden = !state.categories.some((c) => c.name === $("category-filter").value);
}

/** Fills a list of filter buttons, reusing what is there (the sidebar is drawn with every render). */
function syncList(list, items) {
  while (list.children.length > items.length) list.lastChild.remove();
  items.forEach((item, index) => {
    let li = list.children[index];
    if (!li) {
      li = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.className = "filter";
      button.append(document.createElement("span"), document.createElement("span"));
      button.lastChild.className = "count";
      button.addEventListener("click", () => li.pick());
      li.append(button);
      list.append(li);
    }
    li.pick = item.pick;
    li.dataset.key = item.key;
    const button = li.firstChild;
    button.setAttribute("aria-pressed", String(item.pressed));
    if (button.firstChild.textContent !== item.label) button.firstChild.textContent = item.label;
    const count = item.count.toLocaleString("en");
    if (button.lastChild.textContent !== count) button.lastChild.textContent = count;
    let edit = li.querySelector(".edit");
    if (item.edit && !edit) {
      edit = document.createElement("button");
      edit.type = "button";
      edit.className = "edit";
      edit.textContent = "✎";
      edit.addEventListener("click", () => openCategory(li.dataset.key));
      li.append(edit);
    } else if (!item.edit && edit) {
      edit.remove();
      edit = null;
    }
    if (edit) edit.setAttribute("aria-label", `Change the category ${item.label}`);
  });
}

/** A select's category options: `first` for none chosen, then each name, keeping the choice. */
function syncCategoryOptions(select, names, first, withNone = false) {
  const values = [""].concat(names, withNone ? [NO_CATEGORY] : []);
  const current = [...select.options].map((o) => o.value);
  if (current.length === values.length && current.every((v, i) => v === values[i])) return;
  const chosen = select.value;
  select.replaceChildren(...values.map((value) => {
    const option = document.createElement("option");
    option.value = value;
    option.textContent = value === "" ? first : value === NO_CATEGORY ? "none" : value;
    return option;
  }));
  select.value = values.includes(chosen) ? chosen : "";
}

// The free space of the download root, from /stats: what downloads may still write (the reserve left out).
async function loadDisk() {
  try {
    const disk = (await api("GET", "/stats")).disk;
    $("disk").textContent = disk ? `${formatBytes(disk.usable_bytes)} free for downloads` : "";
  } catch {
    // The banner already says when the server cannot be reached.
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

/** Pauses, resumes or removes every selected download in one request (removing asks first). */
async function bulk(action) {
  const ids = [...state.selected];
  if (!ids.length) return;
  let deleteFiles = false;
  if (action === "remove") {
    const answer = await confirmAction({
      title: `Remove ${ids.length.toLocaleString("en")} download${ids.length === 1 ? "" : "s"}?`,
      text: "Unfinished ones are stopped and their part files deleted. Finished files stay on the disk unless you "
        + "tick the box.",
      ok: "Remove", files: true,
    });
    if (!answer.ok) return;
    deleteFiles = answer.files;
  }
  const buttons = document.querySelectorAll("#selection button");
  buttons.forEach((b) => { b.disabled = true; });
  try {
    const body = { action, ids };
    if (deleteFiles) body.delete_file = true;
    const answer = await api("POST", "/downloads/actions", body);
    const failed = answer.results.filter((r) => r.status >= 400);
    for (const result of answer.results) {
      if (result.download) remember(result.download);
      if (action === "remove" && result.status === 204) forget(result.id);
    }
    showProblem("list-problem", failed.length ? `${failed.length} could not be changed: ${problemText(failed[0].problem)}` : "");
    if (action === "remove") for (const result of answer.results) state.selected.delete(result.id);
  } catch (error) {
    showProblem("list-problem", error);
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

// MARK: confirmation

/** Asks before something that cannot be undone; `files` offers "also delete the files". */
function confirmAction({ title, text, ok, files = false }) {
  const dialog = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = ok;
  $("confirm-files-label").hidden = !files;
  $("confirm-files").checked = false;
  dialog.returnValue = "";
  dialog.showModal();
  $("confirm-cancel").focus();
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve({ ok: dialog.returnValue === "ok", files: files && $("confirm-files").checked });
    }, { once: true });
  });
}

// MARK: formatting

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

/** An RFC 3339 time in this browser's time zone; `short`: today's as the time of day alone. */
function formatTime(text, short = false) {
  const date = new Date(text);
  if (Number.isNaN(date.getTime())) return text;
  return short && date.toDateString() === new Date().toDateString() ? date.toLocaleTimeString() : date.toLocaleString();
}

/** Sizes as people write them, as the server and the CLI read them: 500k, 1.5M, 10MB (powers of 1024). */
function parseSize(text) {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(text);
  if (!match) return null;
  const power = { "": 0, k: 1, m: 2, g: 3, t: 4 }[match[2].toLowerCase()];
  const bytes = Number(match[1]) * 1024 ** power;
  return power === 0 && !Number.isInteger(bytes) ? null : Math.floor(bytes);
}

/** A speed for an input, exactly (2M, 1536k, 1000): what is saved again reads back the same. */
function speedText(bytes) {
  if (bytes === 0) return "none";
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)}M`;
  if (bytes % 1024 === 0) return `${bytes / 1024}k`;
  return String(bytes);
}

// MARK: settings

function showSettings(settings) {
  const input = (id, value, fallback) => {
    $(id).value = value === fallback ? "" : String(value);
    $(id).placeholder = `default ${fallback}`;
  };
  const defaults = settings.defaults;
  input("set-max-active", settings.max_active, defaults.max_active);
  $("set-max-speed").value = settings.max_speed === defaults.max_speed ? "" : speedText(settings.max_speed);
  $("set-max-speed").placeholder = `default ${speedText(defaults.max_speed)}`;
  input("set-connections", settings.default_connections, defaults.default_connections);
  input("set-per-host", settings.max_connections_per_host, defaults.max_connections_per_host);
  // Shown with its password as ***: saved again only when changed, so the stored password stays.
  input("set-proxy", settings.proxy, defaults.proxy);
  $("set-proxy").dataset.shown = $("set-proxy").value;
  $("schedule").replaceChildren(...settings.speed_schedule.map(windowRow));
  $("schedule-zone").textContent = `Times in the server's time zone, ${settings.time_zone} (UTC${settings.utc_offset}); `
    + "the first window that holds the moment sets the limit, outside them the max speed above.";
  $("limit").textContent = settings.current_max_speed
    ? `limit ${formatBytes(settings.current_max_speed)}/s` : "";
  lockSettings();
}

function windowRow(window) {
  const row = $("window-template").content.firstElementChild.cloneNode(true);
  const days = window ? window.days : DAYS;
  for (const box of row.querySelectorAll(".days input")) box.checked = days.includes(box.value);
  row.querySelector(".from").value = window ? window.from : "";
  row.querySelector(".to").value = window ? window.to : "";
  row.querySelector(".speed").value = window ? (window.max_speed === 0 ? "0" : speedText(window.max_speed)) : "";
  row.querySelector(".remove-window").addEventListener("click", () => row.remove());
  return row;
}

async function loadSettings() {
  try {
    showSettings(await api("GET", "/settings"));
  } catch (error) {
    showProblem("settings-problem", error);
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
  const schedule = [...$("schedule").children].map((row, index) => {
    // A window saves as it reads: an empty "at most" is no limit only if it says so.
    const limit = row.querySelector(".speed").value;
    row.classList.toggle("invalid", limit.trim() === "");
    if (limit.trim() === "") {
      throw new Error(`window ${index + 1}: at most what? Give a speed like 2M, or 0 for no limit`);
    }
    const time = (input, latest) => {
      const text = input.value.trim();
      const match = /^(\d{1,2}):(\d{2})$/.exec(text);
      const hours = match ? Number(match[1]) : NaN, minutes = match ? Number(match[2]) : NaN;
      const fits = match && minutes < 60 && (hours < 24 || (latest === "24:00" && hours === 24 && minutes === 0));
      row.classList.toggle("invalid", !fits);
      if (!fits) {
        throw new Error(text === "" ? `window ${index + 1}: from and to are times like 09:00`
          : `window ${index + 1}: ${text} is not a time of the day: hours go from 00 to 23, minutes from 00 to 59`
            + (latest === "24:00" ? " (24:00 ends the day)" : ""));
      }
      return `${String(hours).padStart(2, "0")}:${match[2]}`;
    };
    return {
      days: [...row.querySelectorAll(".days input:checked")].map((box) => box.value),
      from: time(row.querySelector(".from"), "23:59"),
      to: time(row.querySelector(".to"), "24:00"),
      max_speed: speed(limit),
    };
  });
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

$("settings-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("settings-saved").textContent = "";
  try {
    showSettings(await api("PATCH", "/settings", settingsBody()));
    showProblem("settings-problem", "");
    $("settings-saved").textContent = "Saved.";
  } catch (error) {
    showProblem("settings-problem", error);
  }
});
$("add-window").addEventListener("click", () => $("schedule").appendChild(windowRow(null)));

// MARK: categories

async function loadCategories() {
  try {
    state.categories = (await api("GET", "/categories")).categories;
    const names = state.categories.map((c) => c.name).sort();
    syncCategoryOptions($("category"), names, "none");
    syncCategoryOptions($("webhook-category"), names, "every download");
    scheduleRender();
  } catch {
    // The banner or the connection line says why.
  }
}

/** The category form, empty for a new one or filled with `name`'s. */
function openCategory(name) {
  const category = state.categories.find((c) => c.name === name);
  $("category-title").textContent = category ? `Category ${category.name}` : "New category";
  $("cat-name").value = category ? category.name : "";
  $("cat-name").readOnly = Boolean(category);
  $("cat-directory").value = category ? category.directory : "";
  $("cat-completed").value = category && category.completed_directory ? category.completed_directory : "";
  $("cat-connections").value = category && category.connections ? String(category.connections) : "";
  $("cat-max-speed").value = category && category.max_speed ? speedText(category.max_speed) : "";
  $("cat-priority").value = category && category.priority !== null && category.priority !== undefined
    ? String(category.priority) : "";
  $("cat-proxy").value = category && category.proxy ? category.proxy : "";
  $("cat-proxy").dataset.shown = $("cat-proxy").value;
  $("category-delete").hidden = !category;
  showProblem("category-problem", "");
  $("category-dialog").showModal();
  (category ? $("cat-directory") : $("cat-name")).focus();
}

$("new-category").addEventListener("click", () => openCategory(null));
$("new-category-here").addEventListener("click", () => openCategory(null));
$("edit-category").addEventListener("click", () => openCategory($("category-filter").value));
$("category-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const name = $("cat-name").value.trim();
  const body = {};
  try {
    // Said here, in the server's words: a name that is no name would become another path.
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) {
      throw new Error("name: must be 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit");
    }
    if ($("cat-directory").value.trim()) body.directory = $("cat-directory").value.trim();
    if ($("cat-completed").value.trim()) body.completed_directory = $("cat-completed").value.trim();
    if ($("cat-connections").value.trim()) body.connections = Number($("cat-connections").value);
    const speed = $("cat-max-speed").value.trim();
    if (speed && speed.toLowerCase() !== "none") {
      const bytes = parseSize(speed);
      if (bytes === null) throw new Error(`speed limit: '${speed}' is not a speed like 500k or 2M`);
      body.max_speed = bytes;
    }
    if ($("cat-priority").value.trim()) body.priority = Number($("cat-priority").value);
    const proxy = $("cat-proxy").value.trim();
    // A proxy shown with its password as *** is sent again only when changed.
    if (proxy && proxy !== $("cat-proxy").dataset.shown) body.proxy = proxy;
    else if (proxy) {
      const known = state.categories.find((c) => c.name === name);
      if (known && known.proxy && !known.proxy.includes("***")) body.proxy = proxy;
    }
    await api("PUT", `/categories/${encodeURIComponent(name)}`, body);
    $("category-dialog").close();
    await loadCategories();
  } catch (error) {
    showProblem("category-problem", error);
  }
});
$("category-delete").addEventListener("click", async () => {
  const name = $("cat-name").value.trim();
  try {
    await api("DELETE", `/categories/${encodeURIComponent(name)}`);
    $("category-dialog").close();
    if ($("category-filter").value === name) $("category-filter").value = "";
    await loadCategories();
  } catch (error) {
    showProblem("category-problem", error);
  }
});

// MARK: tokens

/** The tokens an admin handed out, each with what it reaches and holds, and a way to revoke it. */
async function loadTokens() {
  try {
    const { tokens } = await api("GET", "/tokens");
    $("token-list").replaceChildren(...tokens.map(tokenItem));
    if (!tokens.length) {
      const none = document.createElement("li");
      none.className = "muted";
      none.textContent = "No tokens yet: every client uses the server's own.";
      $("token-list").append(none);
    }
  } catch (error) {
    showProblem("tokens-problem", error);
  }
}

function tokenItem(token) {
  const item = document.createElement("li");
  const head = document.createElement("div");
  head.className = "head";
  const text = document.createElement("span");
  text.className = "grow";
  const parts = [token.scope];
  if (token.root) parts.push(`root ${token.root}`);
  if (token.quota_bytes) parts.push(`${formatBytes(token.used_bytes || 0)} of ${formatBytes(token.quota_bytes)}`);
  else if (token.used_bytes) parts.push(`holds ${formatBytes(token.used_bytes)}`);
  if (token.max_active) parts.push(`${token.max_active} at once`);
  parts.push(token.expires_at ? `expires ${formatTime(token.expires_at)}` : "no expiry");
  text.textContent = `${token.name}: ${parts.join(", ")}`;
  const revoke = document.createElement("button");
  revoke.type = "button";
  revoke.textContent = "Revoke";
  revoke.addEventListener("click", async () => {
    const answer = await confirmAction({ title: `Revoke the token ${token.name}?`,
      text: "It is refused from its next request on, and its open streams are cut off. Its downloads stay.",
      ok: "Revoke" });
    if (!answer.ok) return;
    try {
      await api("DELETE", `/tokens/${encodeURIComponent(token.id)}`);
      loadTokens();
    } catch (error) {
      showProblem("tokens-problem", error);
    }
  });
  head.append(text, revoke);
  item.append(head);
  return item;
}

$("open-tokens").addEventListener("click", () => {
  showProblem("tokens-problem", "");
  $("token-secret").textContent = "";
  loadTokens();
  $("tokens-dialog").showModal();
});

$("token-create-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("token-secret").textContent = "";
  const body = { name: $("tok-name").value.trim(), scope: $("tok-scope").value };
  try {
    if ($("tok-root").value.trim()) body.root = $("tok-root").value.trim();
    const quota = $("tok-quota").value.trim();
    if (quota && quota.toLowerCase() !== "none") {
      const bytes = parseSize(quota);
      if (bytes === null) throw new Error(`quota: '${quota}' is not a size like 50G or 500M`);
      body.quota_bytes = bytes;
    }
    if ($("tok-max-active").value.trim()) body.max_active = Number($("tok-max-active").value);
    if ($("tok-expires").value) body.expires_at = new Date($("tok-expires").value).toISOString();
    const token = await api("POST", "/tokens", body);
    $("token-secret").textContent = `Secret of ${token.name}, shown this once: ${token.secret}`;
    showProblem("tokens-problem", "");
    for (const id of ["tok-name", "tok-root", "tok-quota", "tok-max-active", "tok-expires"]) $(id).value = "";
    loadTokens();
  } catch (error) {
    showProblem("tokens-problem", error);
  }
});

// MARK: webhooks

async function loadWebhookList() {
  const { webhooks } = await api("GET", "/webhooks");
  state.webhooks = new Map(webhooks.map((hook) => [hook.id, hook]));
  return webhooks;
}

async function loadWebhooks() {
  try {
    const webhooks = await loadWebhookList();
    const list = $("webhook-list");
    list.replaceChildren();
    for (const hook of webhooks) {
      const item = document.createElement("li");
      const head = document.createElement("div");
      head.className = "head";
      const text = document.createElement("span");
      text.className = "grow";
      text.textContent = `${hook.url}: ${hook.events.join(", ")}${hook.category ? ` (category ${hook.category})` : ""}`;
      const show = document.createElement("button");
      show.type = "button";
      show.className = "show-deliveries";
      show.textContent = "Deliveries";
      show.setAttribute("aria-expanded", "false");
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "remove-webhook";
      remove.textContent = "Remove";
      remove.setAttribute("aria-label", `Remove the webhook to ${hook.url}`);
      remove.addEventListener("click", async () => {
        try {
          await api("DELETE", `/webhooks/${hook.id}`);
          loadWebhooks();
        } catch (error) {
          showProblem("webhook-problem", error);
        }
      });
      const deliveries = document.createElement("div");
      deliveries.className = "delivery-list";
      deliveries.hidden = true;
      show.addEventListener("click", () => {
        const open = deliveries.hidden;
        deliveries.hidden = !open;
        show.setAttribute("aria-expanded", String(open));
        if (open) loadHookDeliveries(hook.id, deliveries);
      });
      head.append(text, show, remove);
      item.append(head, deliveries);
      list.append(item);
    }
    if (!webhooks.length) list.textContent = "No webhooks.";
  } catch (error) {
    showProblem("webhook-problem", error);
  }
}

/** A webhook's latest deliveries as a table: when, what, about which download, how it went. */
async function loadHookDeliveries(id, container) {
  container.textContent = "Loading…";
  try {
    const { deliveries } = await api("GET", `/webhooks/${id}/deliveries?limit=20`);
    if (!deliveries.length) {
      container.textContent = "Nothing sent yet.";
      return;
    }
    const table = document.createElement("table");
    table.className = "deliveries";
    const head = table.createTHead().insertRow();
    for (const title of ["When", "Event", "Download", "State", "Tries", "Last error"]) {
      const cell = document.createElement("th");
      cell.textContent = title;
      head.append(cell);
    }
    const body = table.createTBody();
    for (const d of deliveries) {
      const row = body.insertRow();
      row.dataset.state = d.state;
      const download = state.downloads.get(d.download_id);
      const status = d.last_status ? `${d.state} (HTTP ${d.last_status})` : d.state;
      const error = d.last_error || (d.next_attempt_at ? `next attempt ${formatTime(d.next_attempt_at)}` : "");
      for (const text of [formatTime(d.last_attempt_at || d.created_at, true), d.event,
                          download ? displayName(download) : d.download_id, status, String(d.attempts), error]) {
        row.insertCell().textContent = text;
      }
    }
    container.replaceChildren(table);
  } catch (error) {
    container.textContent = error.message;
  }
}

$("webhook-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const body = {
    url: $("webhook-url").value.trim(),
    events: [...$("webhook-events").querySelectorAll("input:checked")].map((box) => box.value),
  };
  const category = $("webhook-category").value;
  if (category) body.category = category;
  try {
    const hook = await api("POST", "/webhooks", body);
    showProblem("webhook-problem", "");
    $("webhook-secret").textContent = `Added. Its secret, shown this once: ${hook.secret}`;
    $("webhook-url").value = "";
    loadWebhooks();
  } catch (error) {
    $("webhook-secret").textContent = "";
    showProblem("webhook-problem", error);
  }
});

// MARK: dialogs and forms

/** Asks for the token: the server refused the one in use (or there is none), or the user wants another
 * (`changing`: the one in use works, and may be kept). */
function askForToken(message, changing = false) {
  if (!changing) {
    if (state.source) state.source.close();
    setConnection("down", "needs a token");
  }
  $("token-cancel").hidden = !changing;
  $("token-problem").textContent = message;
  if (!$("token-dialog").open) $("token-dialog").showModal();
  $("token").focus();
}
$("token-cancel").addEventListener("click", () => {
  $("token").value = "";
  $("token-dialog").close();
});

$("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  localStorage.setItem(TOKEN_KEY, state.token);
  $("token-dialog").close();
  $("token").value = "";
  start();
});
// The page is of no use without the token: Escape does not close its form.
$("token-dialog").addEventListener("cancel", (event) => event.preventDefault());

for (const button of document.querySelectorAll(".close-dialog")) {
  button.addEventListener("click", () => button.closest("dialog").close());
}
$("open-add").addEventListener("click", () => {
  loadCategories();
  $("add-dialog").showModal();
  $("urls").focus();
});
$("open-settings").addEventListener("click", () => {
  showProblem("settings-problem", "");
  $("settings-saved").textContent = "";
  loadSettings();
  showTokenInfo();
  lockSettings();
  $("settings-dialog").showModal();
});

/** A token below manage sees the settings and cannot change them: the fields say so instead of failing on Save. */
function lockSettings() {
  const locked = !mayUse("manage");
  for (const field of $("settings-form").querySelectorAll("input, select")) field.disabled = locked;
  $("settings-note").textContent = locked
    ? `Read only: this token's scope (${document.body.dataset.scope}) cannot change the settings.`
    : "Changes take effect at once and are kept by the server; an empty field is the server's default (shown in grey).";
  $("settings-note").className = locked ? "readonly-note" : "muted";
}

/** Which token this browser uses, with the ways to change or forget it (only when the server asks for one). */
function showTokenInfo() {
  $("token-info").hidden = !state.token;
  if (!state.token) return;
  const me = state.me;
  $("token-who").textContent = me && me.name
    ? `This browser uses the token ${me.name} (${me.scope}${me.root ? `, root ${me.root}` : ""}).`
    : "This browser uses the server's own token (everything).";
}
$("change-token").addEventListener("click", () => {
  $("settings-dialog").close();
  askForToken("", true);
});
$("forget-token").addEventListener("click", () => {
  localStorage.removeItem(TOKEN_KEY);
  state.token = "";
  $("settings-dialog").close();
  // Everything the page holds came with that token: start again without it (the server asks for one if it needs).
  location.reload();
});
$("open-webhooks").addEventListener("click", () => {
  loadCategories();
  loadWebhooks();
  $("webhooks-dialog").showModal();
});

const ADD_FIELDS = ["filename", "directory", "connections", "max_speed", "checksum", "proxy", "username",
  "password", "cookies", "referer", "user_agent", "variant"];

/**
 * The options that stay from one add to the next, said beside "More options" so that a collapsed panel hides none
 * of them; the name and checksum are one URL's and are cleared after each add.
 */
function showStickyOptions() {
  const shown = [];
  if ($("directory").value.trim()) shown.push(`in ${$("directory").value.trim()}`);
  if ($("connections").value.trim()) shown.push(`${$("connections").value.trim()} connections`);
  if ($("max_speed").value.trim()) shown.push(`at most ${$("max_speed").value.trim()}/s`);
  if ($("proxy").value.trim()) shown.push(`proxy ${$("proxy").value.trim().replace(/:[^:@/]*@/, ":***@")}`);
  if ($("username").value.trim()) shown.push(`as ${$("username").value.trim()}`);
  if ($("cookies").value.trim()) shown.push("cookies");
  if ($("referer").value.trim()) shown.push("referer");
  if ($("user_agent").value.trim()) shown.push("user agent");
  if ($("variant").value.trim()) shown.push(`HLS variant ${$("variant").value.trim()}`);
  if ($("filename").value.trim()) shown.push(`named ${$("filename").value.trim()}`);
  if ($("checksum").value.trim()) shown.push("checksum");
  $("options-summary").textContent = shown.length ? `(${shown.join(", ")})` : "";
}
for (const id of ADD_FIELDS) {
  $(id).addEventListener("input", showStickyOptions);
  $(id).addEventListener("change", showStickyOptions);
}

/** Adds the URLs of the box, one a line, as one batch; the lines refused stay in the box with their reasons. */
$("add-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const lines = $("urls").value.split("\n").map((line) => line.trim()).filter((line) => line && !line.startsWith("#"));
  if (!lines.length) return;
  if (lines.length > 1 && ($("filename").value.trim() || $("checksum").value.trim())) {
    showProblem("add-problem", "A file name and a checksum are one URL's: add one URL with them, or clear them.");
    return;
  }
  const options = {};
  for (const field of ["filename", "directory", "checksum", "proxy", "username", "password", "cookies", "referer",
                       "user_agent", "variant"]) {
    const value = $(field).value.trim();
    if (value) options[field] = value;
  }
  if ($("category").value) options.category = $("category").value;
  for (const field of ["connections", "priority"]) {
    const value = $(field).value.trim();
    if (value) options[field] = Number(value);
  }
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
      const { status, data } = await apiAnswer("POST", "/downloads", { url: lines[0], ...options });
      remember(data);
      $("urls").value = "";
      clearOneURLOptions();
      // 200: that URL into that folder is in the list already, and the answer is that download: say so.
      if (status === 200) showProblem("add-problem", alreadyListed(data));
      else {
        showProblem("add-problem", "");
        $("add-dialog").close();
      }
    } else {
      const answer = await api("POST", "/downloads", { downloads: lines.map((url) => ({ url, ...options })) });
      const refused = [];
      const listed = [];
      answer.results.forEach((result, index) => {
        if (result.download) remember(result.download);
        if (result.status === 200) listed.push(`${lines[index]}: ${alreadyListed(result.download)}`);
        else if (!result.download) refused.push({ line: lines[index], reason: problemText(result.problem) });
      });
      $("urls").value = refused.map((r) => r.line).join("\n");
      showProblem("add-problem", refused.map((r) => `${r.line}: ${r.reason}`).concat(listed).join("\n"));
      if (refused.length < lines.length) clearOneURLOptions();
      if (!refused.length && !listed.length) $("add-dialog").close();
    }
  } catch (error) {
    showProblem("add-problem", error);
  } finally {
    button.disabled = false;
  }
});

/** What the add dialog says of a URL already in the list. */
function alreadyListed(d) {
  return `Already in the list: ${displayName(d)} (${d.state}).`;
}

/** The name and checksum were that URL's: the next one gets its own. */
function clearOneURLOptions() {
  $("filename").value = "";
  $("checksum").value = "";
  showStickyOptions();
}

// MARK: the list's controls

for (const id of ["filter", "category-filter", "sort"]) $(id).addEventListener("change", render);
$("search").addEventListener("input", scheduleRender);
$("viewport").addEventListener("scroll", () => {
  state.scroll.set(state.viewKey, $("viewport").scrollTop);
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
  const count = [...state.downloads.values()].filter((d) => d.state === "completed").length;
  if (!count) {
    showProblem("list-problem", "No download is completed.");
    return;
  }
  // Below manage a token removes only the downloads it added: those are cleared, the others' stay.
  const own = !mayUse("manage");
  const answer = await confirmAction({
    title: own ? "Clear the completed downloads this token added?"
      : `Clear ${count.toLocaleString("en")} completed download${count === 1 ? "" : "s"}?`,
    text: "They leave the list; their files stay on the disk unless you tick the box.",
    ok: "Clear", files: true,
  });
  if (!answer.ok) return;
  try {
    const body = { action: "remove", state: ["completed"] };
    if (answer.files) body.delete_file = true;
    const result = await api("POST", "/downloads/actions", body);
    let cleared = 0;
    for (const item of result.results) {
      if (item.status === 204) {
        forget(item.id);
        cleared += 1;
      }
    }
    const kept = result.results.length - cleared;
    showProblem("list-problem", own && kept
      ? `Cleared ${cleared}; ${kept} added by others stay (this token clears only its own).` : "");
  } catch (error) {
    showProblem("list-problem", error);
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
document.body.dataset.stale = "false";

// A wait to retry counts down without an event: the rows on screen are redrawn each second while one waits.
setInterval(() => {
  if (state.shown.some(isRetrying)) renderWindow();
}, 1000);

setInterval(loadDisk, 30000);

start();
