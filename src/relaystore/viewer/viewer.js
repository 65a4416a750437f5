// relaystore's viewer: a read-only page over the origin's read routes and its event feed.
// Plain script, no build step. Every text from the store is set with textContent, never
// as markup. The page never sees the bearer token after the sign-in form posts it: the
// server answers with an HttpOnly cookie, which fetch and EventSource send by themselves.
"use strict";

(() => {
  // The API event types (relaystore.domain.api_events.API_EVENT_KINDS; a test keeps
  // them equal). EventSource delivers a named event only to a listener of that name.
  const EVENT_KINDS = [
    "activity_changed",
    "command_ended",
    "input_required",
    "input_resolved",
    "legacy_notice",
    "runtime_resolved",
    "session_fault",
    "turn_ended",
    "turn_started",
  ];
  const FEED_KEEP = 200; // events kept on screen
  const FEED_BACKLOG = 50; // events shown from before the page opened
  const TEXT_KEEP = 4000; // characters of a tool's output shown before "…"
  const POLL_MS = 3000; // a transcript following live asks for more this often
  const HEALTH_MS = 10000; // the header asks /healthz this often while it answers
  const RETRY_MS = 2000; // and this often while it does not
  const STATS_MS = 60000;
  const WINDOW_PAGES = 4; // pages of a transcript kept in the page at once
  const EDGE_PX = 400; // scrolled this close to a loaded end, the next page loads
  const BAD_KINDS = ["rejected", "interrupted", "failed"];
  // Reasons that mean someone meant to stop the work (domain.outcomes.expected_cancellation).
  const EXPECTED = ["controller_disconnected", "owner_lost_on_restart", "requested_cancellation"];

  const query = new URLSearchParams(location.search);
  const PAGE = Math.min(Math.max(parseInt(query.get("page_size"), 10) || 50, 1), 500);
  const KEEP = PAGE * WINDOW_PAGES;

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function badge(text, kind) {
    return el("span", `badge ${kind || ""} v-${String(text).replace(/[^a-z0-9_-]/gi, "")}`, text);
  }

  // An error or fault: its own colour and a text marker, never colour alone.
  function errorBadge(text) {
    return el("span", "badge alarm", `⚠ ${text}`);
  }

  function isBadOutcome(outcome) {
    return Boolean(outcome) && BAD_KINDS.includes(outcome.kind) && !EXPECTED.includes(outcome.reason);
  }

  function when(value) {
    if (value === undefined || value === null || value === "") return "";
    const date = typeof value === "number" ? new Date(value) : new Date(value);
    return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString();
  }

  function clock(ms) {
    const date = new Date(ms);
    return Number.isNaN(date.getTime()) ? "" : date.toLocaleTimeString();
  }

  function tokens(n) {
    return typeof n === "number" ? n.toLocaleString() : "–";
  }

  function shortId(id) {
    return id.length > 13 ? `${id.slice(0, 8)}…` : id;
  }

  function clip(text) {
    return text.length > TEXT_KEEP ? `${text.slice(0, TEXT_KEEP)}\n… (${text.length - TEXT_KEEP} more characters)` : text;
  }

  class SignedOut extends Error {}

  async function api(path) {
    let response;
    try {
      response = await fetch(path, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
        cache: "no-store",
      });
    } catch (error) {
      checkHealthSoon();
      throw error;
    }
    if (response.status === 401) {
      showSignIn(started);
      throw new SignedOut("signed out");
    }
    let body = null;
    try {
      body = await response.json();
    } catch (_) {
      body = null;
    }
    if (!response.ok) throw new Error((body && body.error) || `HTTP ${response.status}`);
    return body;
  }

  function quietly(promise) {
    return promise.catch((error) => {
      if (!(error instanceof SignedOut)) console.warn("relaystore viewer:", error);
    });
  }

  // One pending call per key: bursts of feed events cost one request.
  const timers = new Map();
  function soon(key, action, delay = 250) {
    if (timers.has(key)) return;
    timers.set(key, setTimeout(() => {
      timers.delete(key);
      quietly(action());
    }, delay));
  }

  // -- sign-in ------------------------------------------------------------------------

  let started = false;
  let feed = null;

  function showSignIn(wasSignedIn) {
    if (feed) {
      feed.close();
      feed = null;
    }
    closeSessionFeed();
    // Signed in a moment ago and refused now: say why rather than drop the reader silently.
    if (wasSignedIn) $("signin-expired").hidden = false;
    $("app").hidden = true;
    $("health").hidden = true;
    $("signout").hidden = true;
    $("signin-view").hidden = false;
    document.body.dataset.view = "signin";
    $("token").focus();
  }

  function showApp() {
    $("signin-view").hidden = true;
    $("app").hidden = false;
    $("health").hidden = false;
    $("signout").hidden = false;
    document.body.dataset.view = "app";
  }

  // -- health -------------------------------------------------------------------------

  const store = { latest: 0, stats: null, reachable: true };
  let healthTimer = null;

  // The header's word on the server: "healthy" while /healthz answers ok, "unreachable"
  // while nothing answers, "unhealthy" when it answers otherwise. A failing check asks
  // again every RETRY_MS; coming back, the page picks up where it was by itself.
  async function loadHealth() {
    const state = $("health-state");
    let ok = false;
    try {
      const response = await fetch("/healthz", { cache: "no-store" });
      const body = await response.json().catch(() => ({}));
      if (response.ok && body.status === "ok") {
        ok = true;
        store.latest = body.latest_seq;
        state.textContent = "healthy";
        state.className = "dot ok";
        state.title = "GET /healthz answers ok";
      } else {
        state.textContent = "unhealthy";
        state.className = "dot bad";
        state.title = body.error || `GET /healthz answered HTTP ${response.status}`;
      }
    } catch (_) {
      state.textContent = "server unreachable · retrying";
      state.className = "dot bad unreachable";
      state.title = "GET /healthz did not answer: relaystore serve is not running or not reachable";
    }
    const back = ok && !store.reachable;
    store.reachable = ok;
    document.body.dataset.server = ok ? "up" : "down";
    renderFigures();
    scheduleHealth(ok ? HEALTH_MS : RETRY_MS);
    if (back) recover();
  }

  function scheduleHealth(delay) {
    clearTimeout(healthTimer);
    healthTimer = setTimeout(() => quietly(loadHealth()), delay);
  }

  function checkHealthSoon() {
    if (started) scheduleHealth(0);
  }

  // The server answers again: reload what may have changed; reopen a feed that gave up.
  function recover() {
    quietly(loadSessions());
    quietly(loadStats());
    if (!feed) follow(feedSeq);
    if (selected) {
      const id = selected;
      quietly(loadDetail(id));
      quietly(loadSubagents(id));
      quietly(followTranscript());
      if (!sessionFeed) openSessionFeed(id, sessionSeq);
    }
  }

  async function loadStats() {
    store.stats = await api("/stats");
    renderFigures();
    renderSessions();
  }

  function renderFigures() {
    const parts = [`seq ${tokens(store.latest)}`];
    const stats = store.stats;
    if (stats) {
      parts.push(`${tokens(stats.sessions)} session${stats.sessions === 1 ? "" : "s"}`);
      const behind = Object.keys(stats.projection_behind || {}).length;
      if (behind) parts.push(`${behind} behind`);
      parts.push(`schema ${stats.schema_revision}`);
      parts.push(`store ${shortId(stats.store_id)}`);
      const kinds = Object.entries(stats.events_by_kind || {}).map(([kind, n]) => `${kind}: ${n}`);
      $("health-figures").title = kinds.length ? `events by kind\n${kinds.join("\n")}` : "no events yet";
    }
    $("health-figures").textContent = parts.join(" · ");
  }

  // -- sessions -----------------------------------------------------------------------

  const list = { sessions: [] };
  let selected = null;

  async function loadSessions() {
    const body = await api("/api/v1/sessions");
    list.sessions = body.sessions.slice().sort(
      (a, b) => String(b.updated_at).localeCompare(String(a.updated_at)) || a.id.localeCompare(b.id),
    );
    renderSessions();
    renderFeedTitles();
  }

  function modelOf(session) {
    const option = (session.config_options || []).find((o) => o.key === "model");
    return option && typeof option.current === "string" ? option.current : "";
  }

  function activityOf(session) {
    const activity = session.activity_state;
    return activity && typeof activity.state === "string" ? activity.state : "";
  }

  function behindOf(id) {
    const behind = store.stats && store.stats.projection_behind;
    return behind ? behind[id] : undefined;
  }

  function renderSessions() {
    const ul = $("session-list");
    ul.replaceChildren();
    $("session-count").textContent = list.sessions.length ? String(list.sessions.length) : "";
    $("sessions-empty").hidden = list.sessions.length > 0;
    for (const session of list.sessions) {
      const li = el("li");
      const button = el("button", "session");
      button.type = "button";
      button.dataset.sessionId = session.id;
      if (session.id === selected) button.classList.add("selected");
      if (session.has_error) button.classList.add("has-error");
      button.append(el("span", "title", session.title || "(untitled)"));
      const badges = el("span", "badges");
      badges.append(badge(session.lifecycle, "lifecycle"), badge(session.chat_phase, "phase"));
      const activity = activityOf(session);
      if (activity) badges.append(badge(activity, "activity"));
      if (behindOf(session.id)) badges.append(badge("behind", "behind"));
      if (session.has_error) badges.append(errorBadge("error"));
      button.append(badges);
      const meta = [shortId(session.id), session.harness_kind, modelOf(session), when(session.updated_at)];
      button.append(el("span", "meta", meta.filter(Boolean).join(" · ")));
      button.addEventListener("click", () => {
        if (fromHash() === session.id) showPane("detail"); // already open: just show it
        else location.hash = `session=${encodeURIComponent(session.id)}`;
      });
      li.append(button);
      ul.append(li);
    }
  }

  // -- one session --------------------------------------------------------------------

  // The transcript on screen: a window of at most KEEP items in position order (whole
  // pages of GET .../items, newest first when a session opens), and the live cursor of
  // GET .../transcript (items whose seq is above it changed since).
  let tx = null;

  function fromHash() {
    const match = /^#session=(.+)$/.exec(location.hash);
    return match ? decodeURIComponent(match[1]) : null;
  }

  function select(id) {
    selected = id;
    renderSessions();
    $("detail-empty").hidden = Boolean(id);
    $("detail").hidden = !id;
    closeSessionFeed();
    tx = null;
    $("transcript").replaceChildren();
    $("questions").replaceChildren();
    $("usage-rows").replaceChildren();
    $("usage-totals").replaceChildren();
    usage = { id: null, count: 0, after: 0, busy: false, again: false };
    marks.badTurns = new Map();
    marks.faults = new Set();
    if (!id) return;
    showPane("detail");
    $("detail-more").open = window.innerWidth >= 1280 && window.innerHeight >= 850;
    quietly(loadDetail(id));
    quietly(loadSubagents(id));
    // The transcript first: the turns and the session's stream wait until it shows.
    quietly(openTranscript(id).finally(() => {
      if (selected !== id) return;
      quietly(loadUsage(id));
      quietly(loadQuestions(id));
      openSessionFeed(id);
    }));
  }

  function fact(dl, name, value) {
    if (value === undefined || value === null || value === "") return;
    dl.append(el("dt", null, name), el("dd", null, value));
  }

  function outcomeText(outcome) {
    if (!outcome) return "";
    const parts = [outcome.kind];
    if (outcome.stop_reason) parts.push(outcome.stop_reason);
    if (outcome.reason) parts.push(outcome.reason);
    return parts.join(" · ");
  }

  async function loadDetail(id) {
    const session = await api(`/api/v1/sessions/${encodeURIComponent(id)}`);
    if (selected !== id) return;
    $("detail-title").textContent = session.title || "(untitled)";
    const badges = $("detail-badges");
    badges.replaceChildren(badge(session.lifecycle, "lifecycle"), badge(session.chat_phase, "phase"));
    const activity = activityOf(session);
    if (activity) badges.append(badge(activity, "activity"));
    if (session.activity_state && session.activity_state.waiting_for_input) badges.append(badge("waiting for input", "waiting"));
    const last = session.last_turn_outcome;
    if (last && isBadOutcome(last.outcome)) badges.append(errorBadge(`last turn ${outcomeText(last.outcome)}`));
    const dl = $("detail-facts");
    dl.replaceChildren();
    fact(dl, "Session", session.id);
    fact(dl, "Workspace", session.workspace_id);
    fact(dl, "Harness", [session.harness_kind, modelOf(session)].filter(Boolean).join(" · "));
    fact(dl, "State", session.state);
    fact(dl, "Created", when(session.created_at));
    fact(dl, "Updated", when(session.updated_at));
    if (last) fact(dl, "Last turn", `${last.command_id}: ${outcomeText(last.outcome)}`);
    const behind = session.projection_behind;
    $("detail-behind").hidden = !behind;
    $("detail-behind").textContent = behind
      ? `Projection behind at ordinal ${behind.ordinal} (unknown ${behind.position} ${behind.kind}): ` +
        `${behind.kept_ordinal - behind.ordinal + 1} line(s) kept in the relay log until a build that knows the kind catches up.`
      : "";
    $("detail-error").hidden = !session.has_error;
    $("detail-error").textContent = session.has_error ? `⚠ ${session.error || "The session reports an error."}` : "";
  }

  // The session's sub-agents, under it: each its task, state and title, a link to it.
  async function loadSubagents(id) {
    const box = $("detail-subagents");
    box.hidden = true;
    $("subagent-list").replaceChildren();
    const body = await api(`/api/v1/sessions/${encodeURIComponent(id)}/subagents`);
    if (selected !== id) return;
    const rows = body.subagents.map((entry) => {
      const child = entry.session;
      const link = el("a", "subagent", null);
      link.href = `#session=${encodeURIComponent(child.id)}`;
      link.dataset.sessionId = child.id;
      link.append(
        el("span", "subagent-task", entry.task_name),
        el("span", "subagent-state", [child.lifecycle, child.is_idle ? "idle" : "busy"].filter(Boolean).join(" · ")),
        el("span", "subagent-title", child.title || child.id),
      );
      if (child.has_error) link.append(errorBadge("error"));
      const row = el("li", null, null);
      row.append(link);
      return row;
    });
    $("subagent-list").replaceChildren(...rows);
    $("subagent-count").textContent = rows.length ? String(rows.length) : "";
    box.hidden = rows.length === 0;
  }

  function itemsPath(id, params) {
    const search = new URLSearchParams({ ...params, limit: String(PAGE) });
    return `/api/v1/sessions/${encodeURIComponent(id)}/items?${search}`;
  }

  // Opens the session at its newest page, scrolled to the end, following live.
  async function openTranscript(id) {
    const body = await api(itemsPath(id, {}));
    if (selected !== id) return;
    tx = {
      id,
      order: [], // stable ids on screen, in position order
      items: new Map(), // stable id -> item on screen
      nodes: new Map(), // stable id -> its element
      older: body.older,
      newer: false,
      total: body.total,
      first: body.total - body.items.length, // index of order[0] in the whole transcript
      maxPosition: 0, // the highest position ever seen: a higher one is a new item
      cursor: body.follow_after_seq, // GET .../transcript resumes after it
      busy: false,
      following: false,
      stuck: true, // the reader is at the end: the view follows what arrives
      unseen: 0,
    };
    const page = tx;
    $("transcript").replaceChildren();
    place(page, body.items, "end");
    for (const item of body.items) page.maxPosition = Math.max(page.maxPosition, item.position);
    renderWindow(page);
    const box = $("transcript-scroll");
    box.scrollTop = box.scrollHeight;
    await fillView(page);
    if (tx === page) box.scrollTop = box.scrollHeight;
  }

  // Puts a page of items at one end of the window and trims the other end to KEEP.
  function place(page, items, where) {
    const box = $("transcript");
    const fresh = items.filter((item) => !page.items.has(item.stable_id));
    const nodes = fresh.map((item) => {
      const node = renderItem(item);
      page.items.set(item.stable_id, item);
      page.nodes.set(item.stable_id, node);
      return node;
    });
    const ids = fresh.map((item) => item.stable_id);
    keepAnchor(() => {
      if (where === "start") {
        box.prepend(...nodes);
        page.order = ids.concat(page.order);
        page.first -= ids.length;
        drop(page, page.order.length - KEEP, "end");
      } else {
        box.append(...nodes);
        page.order = page.order.concat(ids);
        drop(page, page.order.length - KEEP, "start");
      }
    });
  }

  function drop(page, count, where) {
    if (count <= 0) return;
    const gone = where === "start" ? page.order.splice(0, count) : page.order.splice(page.order.length - count, count);
    for (const id of gone) {
      page.nodes.get(id).remove();
      page.nodes.delete(id);
      page.items.delete(id);
    }
    if (where === "start") {
      page.first += count;
      page.older = true;
    } else {
      page.newer = true;
    }
  }

  // Keeps the item the reader looks at where it is while items come and go around it.
  function keepAnchor(change) {
    const box = $("transcript-scroll");
    const top = box.scrollTop;
    const anchor = [...$("transcript").children].find((node) => node.offsetTop + node.offsetHeight > top);
    const offset = anchor ? anchor.offsetTop - top : 0;
    change();
    if (anchor && anchor.isConnected) box.scrollTop = anchor.offsetTop - offset;
    if (tx) tx.lastTop = box.scrollTop; // a move of ours, not the reader's
  }

  function atEnd(box) {
    return box.scrollHeight - box.scrollTop - box.clientHeight < 40;
  }

  async function pageOlder() {
    const page = tx;
    if (!page || page.busy || !page.older || !page.order.length) return;
    page.busy = true;
    try {
      const first = page.items.get(page.order[0]);
      const body = await api(itemsPath(page.id, { before_position: first.position, before_id: first.stable_id }));
      if (tx !== page) return;
      page.older = body.older;
      place(page, body.items, "start");
      if (!body.older) page.first = 0;
    } finally {
      page.busy = false;
    }
    renderWindow(page);
  }

  async function pageNewer() {
    const page = tx;
    if (!page || page.busy || !page.newer || !page.order.length) return;
    page.busy = true;
    try {
      const last = page.items.get(page.order[page.order.length - 1]);
      const body = await api(itemsPath(page.id, { after_position: last.position, after_id: last.stable_id }));
      if (tx !== page) return;
      page.newer = body.newer;
      place(page, body.items, "end");
    } finally {
      page.busy = false;
    }
    renderWindow(page);
  }

  // Loads pages while the reader is within EDGE_PX of a loaded end, towards which the
  // reader scrolls (``way``: -1 up, 1 down), or both when the view is not full yet.
  async function fillView(page, way = 0) {
    const box = $("transcript-scroll");
    for (let n = 0; n < WINDOW_PAGES && tx === page; n += 1) {
      if (way <= 0 && page.older && box.scrollTop < EDGE_PX) await pageOlder();
      else if (way >= 0 && page.newer && box.scrollHeight - box.scrollTop - box.clientHeight < EDGE_PX) await pageNewer();
      else break;
    }
  }

  // What changed since the live cursor (GET .../transcript by seq): items on screen are
  // replaced in place; new items join the end when the window holds it, and the view
  // follows them unless the reader scrolled up (then a "new items" marker counts them).
  async function followTranscript() {
    const page = tx;
    if (!page || page.following) return;
    page.following = true;
    try {
      for (let pages = 0; pages < 100 && tx === page; pages += 1) {
        const path = `/api/v1/sessions/${encodeURIComponent(page.id)}/transcript?after_seq=${page.cursor}&limit=${PAGE}`;
        const body = await api(path);
        if (tx !== page) return;
        page.cursor = body.next_after_seq;
        page.execution = body.execution && body.execution.state;
        if (body.items.length) arrive(page, body.items);
        if (!body.items.length || body.next_after_seq >= body.latest_seq) break;
      }
    } finally {
      page.following = false;
    }
    renderWindow(page);
  }

  function arrive(page, items) {
    const box = $("transcript-scroll");
    const stick = !page.newer && page.stuck;
    const added = [];
    let fresh = 0;
    keepAnchor(() => {
      for (const item of items) {
        const node = page.nodes.get(item.stable_id);
        if (node) {
          const redrawn = renderItem(item);
          node.replaceWith(redrawn);
          page.nodes.set(item.stable_id, redrawn);
          page.items.set(item.stable_id, item);
        } else if (item.position > page.maxPosition) {
          fresh += 1;
          page.total += 1;
          page.maxPosition = item.position;
          // The window holds the end: the item joins it, unless that would pass KEEP
          // while the reader is scrolled up (then the window stops holding the end).
          if (!page.newer && (stick || page.order.length + added.length < KEEP)) added.push(item);
          else page.newer = true;
        }
      }
      if (added.length) {
        const nodes = added.map((item) => {
          const node = renderItem(item);
          page.items.set(item.stable_id, item);
          page.nodes.set(item.stable_id, node);
          return node;
        });
        $("transcript").append(...nodes);
        page.order = page.order.concat(added.map((item) => item.stable_id));
        drop(page, page.order.length - KEEP, "start");
      }
    });
    if (stick && !page.newer) box.scrollTop = box.scrollHeight;
    else page.unseen += fresh;
  }

  function roleName(role) {
    return { user: "You", agent: "Agent", thought: "Thinking", tool: "Tool", terminal: "Terminal", plan: "Plan", plan_proposal: "Plan proposal", system: "System" }[role] || role;
  }

  // Why an item is an error or a fault, or "" when it is none: an interrupted turn's line,
  // a failed command or tool call, the line of a turn that ended rejected, interrupted or
  // failed (its completion ordinal is the line's position), a session fault.
  function errorOf(item) {
    const id = item.stable_id;
    const text = String(item.text || "");
    const call = item.body && item.body.call;
    if (item.role === "tool" && call && call.status === "failed") return "tool call failed";
    if (id.startsWith("shell:") && /^Shell · (failed|interrupted|signaled|timed out)/.test(text)) return "command failed";
    if (id.startsWith("system:work-interrupted:")) return "interrupted";
    const turn = marks.badTurns.get(item.position);
    if (item.role === "system" && turn) return outcomeText(turn);
    if (item.role === "system" && text.startsWith("warning: ") && marks.faults.has(text.slice(9))) return "session fault";
    return "";
  }

  function renderItem(item) {
    const problem = errorOf(item);
    const article = el("article", `item role-${item.role}${problem ? " is-error" : ""}`);
    article.dataset.stableId = item.stable_id;
    article.dataset.seq = String(item.seq);
    article.dataset.position = String(item.position);
    const head = el("header", "item-head");
    head.append(el("span", "role", roleName(item.role)), el("span", "time", clock(item.created_at_ms)));
    if (problem) head.append(errorBadge(problem));
    article.append(head);
    const body = item.body || {};
    if (item.role === "tool" && body.call) {
      article.append(renderTool(body.call, item.text));
    } else if (item.role === "thought") {
      const details = el("details", "thought");
      details.append(el("summary", null, firstLine(item.text)), el("div", "text", item.text));
      article.append(details);
    } else {
      article.append(el("div", "text", item.text));
    }
    return article;
  }

  // Marks changed (a turn's outcome or a fault arrived): redraw the system lines on screen.
  function remark() {
    const page = tx;
    if (!page) return;
    for (const id of page.order) {
      const item = page.items.get(id);
      if (item.role !== "system" && !id.startsWith("shell:")) continue;
      const fresh = renderItem(item);
      page.nodes.get(id).replaceWith(fresh);
      page.nodes.set(id, fresh);
    }
  }

  function firstLine(text) {
    const line = String(text || "").split("\n", 1)[0];
    return line.length > 120 ? `${line.slice(0, 120)}…` : line;
  }

  function renderTool(call, fallback) {
    const box = el("div", "tool");
    const line = el("div", "tool-line");
    line.append(el("span", "tool-title", call.title || fallback || "tool call"));
    if (call.kind) line.append(badge(call.kind, "kind"));
    if (call.status) line.append(badge(call.status, "status"));
    box.append(line);
    const input = call.rawInput;
    if (input && typeof input === "object" && typeof input.command === "string") {
      box.append(el("pre", "command", `$ ${input.command}`));
    }
    const outputs = (call.content || [])
      .map((part) => (part && part.content && typeof part.content.text === "string" ? part.content.text : ""))
      .filter(Boolean);
    if (outputs.length) {
      const details = el("details", "output");
      details.append(el("summary", null, `Output (${outputs.join("\n").split("\n").length} lines)`), el("pre", null, clip(outputs.join("\n"))));
      box.append(details);
    }
    return box;
  }

  function renderWindow(page) {
    if (tx !== page) return;
    const loaded = page.order.length;
    const total = Math.max(page.total, loaded);
    $("tab-transcript-count").textContent = total ? `${loaded.toLocaleString()} of ${total.toLocaleString()}` : "";
    $("transcript-older").hidden = !page.older;
    $("transcript-newer").hidden = !page.newer;
    $("transcript-newest").hidden = !page.newer;
    const marker = $("transcript-new");
    marker.hidden = page.unseen === 0;
    marker.textContent = `↓ ${page.unseen.toLocaleString()} new item${page.unseen === 1 ? "" : "s"}`;
    let where;
    if (!total) where = "No transcript recorded yet";
    else where = `Items ${(page.first + 1).toLocaleString()}–${(page.first + loaded).toLocaleString()} of ${total.toLocaleString()}`;
    const live = page.newer ? "" : ` · following live${page.execution ? ` · ${page.execution}` : ""}`;
    $("transcript-status").textContent = where + live;
  }

  function onTranscriptScroll() {
    const page = tx;
    if (!page) return;
    const box = $("transcript-scroll");
    const way = Math.sign(box.scrollTop - (page.lastTop || 0));
    page.lastTop = box.scrollTop;
    // Only the reader scrolling up leaves the end: a scroll event that arrives after the
    // layout moved (the room shrank, items grew) must not stop the view following.
    if (page.newer) page.stuck = false;
    else if (atEnd(box)) page.stuck = true;
    else if (way < 0) page.stuck = false;
    if (page.unseen && page.stuck) {
      page.unseen = 0;
      renderWindow(page);
    }
    if (way && !page.busy) quietly(fillView(page, way));
  }

  // The "new items" marker and "Newest": to the end, reopening the window there if the
  // reader paged away from it.
  async function toNewest() {
    const page = tx;
    if (!page) return;
    if (page.newer) {
      await openTranscript(page.id);
      return;
    }
    page.unseen = 0;
    page.stuck = true;
    const box = $("transcript-scroll");
    box.scrollTop = box.scrollHeight;
    renderWindow(page);
  }

  // At the end, the view stays there while the items or the room for them change size.
  function keepAtEnd() {
    const page = tx;
    if (page && page.stuck && !page.newer) {
      const box = $("transcript-scroll");
      box.scrollTop = box.scrollHeight;
    }
  }

  const marks = { badTurns: new Map(), faults: new Set() }; // completion ordinal -> outcome; fault texts

  // The turns table grows: a turn is recorded once, when it ends, so a live event reads
  // only the usage pages after the last turn shown (GET .../usage?after_seq=), never the
  // whole table again. One read at a time per session; an event during one asks for
  // another after it. A session projected again (its newest turn behind the cursor) is
  // read again from its start.
  let usage = { id: null, count: 0, after: 0, busy: false, again: false };

  async function loadUsage(id) {
    if (usage.id !== id) usage = { id, count: 0, after: 0, busy: false, again: false };
    const state = usage;
    if (state.busy) {
      state.again = true;
      return;
    }
    state.busy = true;
    try {
      do {
        state.again = false;
        await readUsage(state);
      } while (state.again && usage === state && selected === id);
    } finally {
      state.busy = false;
    }
  }

  async function readUsage(state) {
    const path = `/api/v1/sessions/${encodeURIComponent(state.id)}/usage`;
    const turns = [];
    let after = state.after;
    let body = null;
    for (let pages = 0; pages < 50; pages += 1) {
      body = await api(`${path}?after_seq=${after}&limit=200`);
      if (usage !== state) return;
      if (body.latest_seq < after) { // projected again: every turn anew
        state.count = 0;
        after = 0;
        turns.length = 0;
        continue;
      }
      turns.push(...body.turns);
      after = Math.max(after, body.next_after_seq);
      if (!body.turns.length || body.next_after_seq >= body.latest_seq) break;
    }
    if (selected !== state.id || usage !== state || !body) return;
    const rows = $("usage-rows");
    if (!state.count) rows.replaceChildren();
    let remarked = false;
    for (const turn of turns) {
      state.count += 1;
      const usageOf = turn.usage || {};
      const outcome = turn.outcome || {};
      const bad = isBadOutcome(outcome);
      const tr = el("tr", bad ? "turn-error" : "");
      const cell = el("td");
      if (bad) {
        cell.append(errorBadge(outcome.kind));
        if (!marks.badTurns.has(turn.completed_ordinal)) {
          marks.badTurns.set(turn.completed_ordinal, outcome);
          remarked = true;
        }
      } else {
        cell.append(badge(outcome.kind || "open", "outcome"));
      }
      const why = [outcome.stop_reason, outcome.reason, outcome.message].filter(Boolean).join(" · ");
      if (why) cell.append(el("span", bad ? "why" : "fine", ` ${why}`));
      tr.append(el("td", "num", state.count), el("td", "mono", turn.command_id), cell, el("td", null, when(turn.completed_at_ms)));
      for (const key of ["total_tokens", "input_tokens", "output_tokens", "cached_read_tokens"]) {
        tr.append(el("td", "num", tokens(usageOf[key])));
      }
      rows.append(tr);
    }
    state.after = after;
    if (remarked) remark();
    if (!state.count) {
      const tr = el("tr");
      const td = el("td", "empty", "No turns recorded yet.");
      td.colSpan = 8;
      tr.append(td);
      rows.append(tr);
    }
    const totals = body.totals || {};
    const foot = $("usage-totals");
    foot.replaceChildren();
    const tr = el("tr");
    const label = el("th", null, "Total");
    label.colSpan = 4;
    tr.append(label);
    for (const key of ["total_tokens", "input_tokens", "output_tokens", "cached_read_tokens"]) {
      tr.append(el("th", "num", tokens(totals[key] && totals[key].tokens)));
    }
    foot.append(tr);
    const coverage = body.coverage || {};
    $("usage-coverage").textContent =
      `${coverage.recorded_turns || 0} turns recorded; ${coverage.full_turn_reports || 0} reported their usage in full, ` +
      `${coverage.missing_reports || 0} without a report.`;
    $("tab-usage-count").textContent = state.count ? String(state.count) : "";
  }

  // -- questions ------------------------------------------------------------------------

  // Every question the session asked, in order, with how it was resolved: the session's
  // own event stream from its start (input_required with the question, input_resolved
  // with the action), and the pending list for questions asked before the stream knew.
  // Who answered and what come from relaystore's own GET .../answers (the journal keeps
  // the action only; the embedder that forwarded the answer recorded the rest).
  let questions = new Map(); // elicitation id -> { request, askedAt, turnId, resolved }
  let answers = new Map(); // elicitation id -> { answered_by, answered_at_ms, answer }

  async function loadQuestions(id) {
    const base = `/api/v1/sessions/${encodeURIComponent(id)}`;
    const [pending, recorded] = await Promise.all([api(`${base}/elicitations`), api(`${base}/answers`)]);
    if (selected !== id) return;
    for (const request of pending) {
      if (!questions.has(request.id)) questions.set(request.id, { request, seq: Infinity, askedAt: null, turnId: null, resolved: null });
    }
    answers = new Map((recorded.answers || []).map((a) => [a.elicitation_id, a]));
    renderQuestions();
  }

  const ACTIONS = {
    accept: "Answered (accepted)",
    decline: "Declined",
    cancel: "Cancelled",
    cleared: "Cleared by the session, never answered",
  };

  function renderQuestions() {
    const box = $("questions");
    box.replaceChildren();
    const all = [...questions.values()].sort((a, b) => a.seq - b.seq); // in the order asked
    const waiting = all.filter((q) => !q.resolved).length;
    $("tab-questions-count").textContent = all.length ? (waiting ? `${waiting} waiting · ${all.length}` : String(all.length)) : "";
    if (!all.length) {
      box.append(el("p", "empty", "This session has asked no question."));
      return;
    }
    all.forEach((entry, index) => {
      const question = entry.request;
      const card = el("article", `question ${entry.resolved ? "resolved" : "waiting"}`);
      card.dataset.elicitationId = question.id;
      const head = el("header", "question-head");
      head.append(el("span", "number", `#${index + 1}`));
      if (entry.askedAt) head.append(el("span", "fine", `asked ${when(entry.askedAt)}`));
      if (entry.turnId !== null && entry.turnId !== undefined) head.append(el("span", "fine", `turn ${entry.turnId}`));
      card.append(head);
      if (question.title) card.append(el("h3", null, question.title));
      card.append(el("p", "text", question.message));
      if (question.description) card.append(el("p", "fine", question.description));
      const fields = el("ul", "fields");
      for (const field of question.fields || []) {
        const li = el("li");
        li.append(el("strong", null, field.title || field.id), badge(field.kind, "kind"));
        if (field.required) li.append(el("span", "fine", " required"));
        if (field.options) li.append(el("span", "fine", ` · ${field.options.map((o) => o.title).join(", ")}`));
        fields.append(li);
      }
      card.append(fields);
      const answer = el("p", "answer");
      const given = answers.get(question.id);
      if (entry.resolved) {
        const action = entry.resolved.action;
        answer.append(el("strong", null, ACTIONS[action] || `Resolved (${action})`));
        const said = given ? "" : " · who answered and what: not recorded (the journal keeps the action only)";
        answer.append(el("span", "fine", `${when(entry.resolved.at)}${said}`));
      } else {
        answer.append(el("strong", null, "Waiting for an answer"));
      }
      card.append(answer);
      if (given) {
        // Recorded by relaystore: who answered, when, and what (a secret field shows masked).
        const by = el("p", "answered-by");
        by.append(el("span", "fine", `answered by ${given.answered_by} at ${when(given.answered_at_ms)}: `), el("span", "text", given.answer));
        card.append(by);
      }
      card.append(el("p", "fine mono", question.id));
      box.append(card);
    });
  }

  // -- the session's own stream ---------------------------------------------------------

  let sessionFeed = null;
  let sessionSeq = 0; // the last event the session's stream delivered

  function openSessionFeed(id, after = 0) {
    closeSessionFeed();
    if (!after) questions = new Map();
    sessionSeq = after;
    const stream = new EventSource(`/api/v1/events?session_id=${encodeURIComponent(id)}&after_seq=${after}`);
    sessionFeed = stream;
    const parse = (message) => {
      try {
        const event = JSON.parse(message.data);
        sessionSeq = Math.max(sessionSeq, event.seq);
        return event;
      } catch (_) {
        return null;
      }
    };
    stream.addEventListener("input_required", (message) => {
      const event = parse(message);
      const request = event && event.data && event.data.request;
      if (!request || selected !== id) return;
      const known = questions.get(request.id);
      questions.set(request.id, {
        request,
        seq: event.seq,
        askedAt: event.recorded_at_ms,
        turnId: event.data.turn_id,
        resolved: known ? known.resolved : null,
      });
      soon("render-questions", async () => renderQuestions(), 100);
    });
    stream.addEventListener("input_resolved", (message) => {
      const event = parse(message);
      if (!event || selected !== id) return;
      const entry = questions.get(event.data.elicitation_id);
      if (entry) entry.resolved = { action: event.data.action, at: event.recorded_at_ms };
      soon("render-questions", async () => renderQuestions(), 100);
    });
    stream.addEventListener("session_fault", (message) => {
      const event = parse(message);
      if (!event || selected !== id) return;
      marks.faults.add(event.data.message);
      soon("remark", async () => remark(), 100);
    });
    stream.addEventListener("error", () => {
      if (stream.readyState !== EventSource.CLOSED || sessionFeed !== stream) return;
      sessionFeed = null;
      setTimeout(() => {
        if (!sessionFeed && selected === id && store.reachable) openSessionFeed(id, sessionSeq);
      }, RETRY_MS);
    });
  }

  function closeSessionFeed() {
    if (sessionFeed) {
      sessionFeed.close();
      sessionFeed = null;
    }
  }

  // -- the live feed ------------------------------------------------------------------

  function summary(event) {
    const data = event.data || {};
    const turn = data.turn || {};
    switch (event.type) {
      case "turn_started":
        return turn.command_id || "";
      case "turn_ended":
        return [turn.command_id, outcomeText(turn.outcome)].filter(Boolean).join(": ");
      case "command_ended":
        return [data.command_kind || data.command_id, data.outcome, data.reason, data.message].filter(Boolean).join(": ");
      case "input_required":
        return (data.request && data.request.message) || "";
      case "input_resolved":
        return data.action || "";
      case "activity_changed":
        return (data.activity && data.activity.state) || "";
      case "runtime_resolved":
        return (data.receipt && data.receipt.harness) || "";
      case "session_fault":
      case "legacy_notice":
        return data.message || "";
      default:
        return "";
    }
  }

  // Whether a feed event reports an error or a fault.
  function feedError(event) {
    const data = event.data || {};
    if (event.type === "session_fault") return "fault";
    if (event.type === "command_ended" && data.outcome === "failed") return "failed";
    if (event.type === "turn_ended" && data.turn && isBadOutcome(data.turn.outcome)) return data.turn.outcome.kind;
    return "";
  }

  // A session new to the list shows its id until the list knows its title: then every
  // line of the feed naming it shows the title.
  function renderFeedTitles() {
    for (const link of document.querySelectorAll("#feed .feed-session")) nameLink(link);
  }

  function nameLink(link) {
    const session = list.sessions.find((s) => s.id === link.dataset.sessionId);
    const title = session && session.title ? session.title : "";
    link.textContent = title || shortId(link.dataset.sessionId);
    link.dataset.title = title;
  }

  function onFeedEvent(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    feedSeq = Math.max(feedSeq, event.seq);
    const ol = $("feed");
    const problem = feedError(event);
    const li = el("li", `feed-item${problem ? " is-error" : ""}`);
    li.dataset.seq = String(event.seq);
    const head = el("div", "feed-head");
    head.append(el("span", "seq", `#${event.seq}`), badge(event.type, "type"));
    if (problem) head.append(errorBadge(problem));
    head.append(el("span", "time", clock(event.recorded_at_ms)));
    li.append(head);
    const link = el("a", "feed-session");
    link.href = `#session=${encodeURIComponent(event.session_id)}`;
    link.dataset.sessionId = event.session_id;
    nameLink(link);
    li.append(link);
    const text = summary(event);
    if (text) li.append(el("div", "feed-text", firstLine(text)));
    ol.prepend(li);
    while (ol.children.length > FEED_KEEP) ol.lastElementChild.remove();
    $("feed-empty").hidden = true;
    if (event.seq > store.latest) {
      store.latest = event.seq;
      renderFigures();
    }
    if (!list.sessions.some((s) => s.id === event.session_id)) soon("stats", loadStats, 500);
    soon("sessions", loadSessions);
    if (event.session_id === selected) {
      const id = selected;
      soon("detail", () => loadDetail(id));
      soon("transcript", () => followTranscript());
      soon("usage", () => loadUsage(id));
      soon("questions", () => loadQuestions(id));
    }
  }

  // The feed. A browser's EventSource resumes by itself with Last-Event-ID on the URL it
  // was opened with, whose after_seq then disagrees (the server answers 400 and the
  // stream closes): a closed stream is reopened after the last event it delivered.
  let feedSeq = 0;

  function follow(after) {
    const state = $("feed-state");
    const stream = new EventSource(`/api/v1/events?after_seq=${after}`);
    feed = stream;
    feedSeq = after;
    stream.addEventListener("open", () => {
      state.textContent = "live";
      state.className = "pill live";
    });
    stream.addEventListener("error", () => {
      state.textContent = "reconnecting";
      state.className = "pill waiting";
      checkHealthSoon();
      if (stream.readyState === EventSource.CLOSED && feed === stream) {
        feed = null;
        // Shows the sign-in when that is why; an unreachable server is the health check's.
        quietly(api("/api/v1/workspaces").then(() => {
          if (!feed && started) setTimeout(() => feed || follow(feedSeq), RETRY_MS);
        }));
      }
    });
    for (const kind of EVENT_KINDS) stream.addEventListener(kind, onFeedEvent);
  }

  // -- start --------------------------------------------------------------------------

  function showTab(name) {
    for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.tab === name);
    for (const body of ["transcript", "usage", "questions"]) $(`tab-${body}`).hidden = body !== name;
  }

  // On a narrow screen one pane shows at a time (the bar of panes chooses it).
  function showPane(name) {
    $("app").dataset.pane = name;
    for (const button of document.querySelectorAll(".pane-button")) button.classList.toggle("active", button.dataset.pane === name);
  }

  async function start() {
    if (query.get("signin") === "refused") $("signin-refused").hidden = false;
    if (query.has("signin")) history.replaceState(null, "", location.pathname + location.hash);
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
    for (const button of document.querySelectorAll(".pane-button")) button.addEventListener("click", () => showPane(button.dataset.pane));
    $("transcript-older").addEventListener("click", () => quietly(pageOlder()));
    $("transcript-newer").addEventListener("click", () => quietly(pageNewer()));
    $("transcript-newest").addEventListener("click", () => quietly(toNewest()));
    $("transcript-new").addEventListener("click", () => quietly(toNewest()));
    $("transcript-scroll").addEventListener("scroll", onTranscriptScroll, { passive: true });
    const resized = new ResizeObserver(keepAtEnd);
    resized.observe($("transcript-scroll"));
    resized.observe($("transcript"));
    $("signin").addEventListener("submit", () => {
      $("signin-button").disabled = true;
    });
    try {
      await loadSessions();
    } catch (error) {
      if (!(error instanceof SignedOut)) {
        showApp();
        $("detail-empty").textContent = `The store did not answer: ${error.message}`;
      }
      return;
    }
    showApp();
    started = true;
    await quietly(loadHealth());
    quietly(loadStats());
    follow(Math.max(0, store.latest - FEED_BACKLOG));
    select(fromHash());
    window.addEventListener("hashchange", () => select(fromHash()));
    setInterval(() => quietly(loadStats()), STATS_MS);
    setInterval(() => {
      if (started && tx && !document.hidden && store.reachable) quietly(followTranscript());
    }, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", () => quietly(start()));
})();
