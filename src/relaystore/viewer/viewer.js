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
  const POLL_MS = 3000; // a caught-up transcript asks for more this often
  const HEALTH_MS = 10000;
  const STATS_MS = 60000;

  const query = new URLSearchParams(location.search);
  const PAGE = Math.min(Math.max(parseInt(query.get("page_size"), 10) || 50, 1), 500);

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
    const response = await fetch(path, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
      cache: "no-store",
    });
    if (response.status === 401) {
      showSignIn();
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

  function showSignIn() {
    if (feed) {
      feed.close();
      feed = null;
    }
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

  const store = { latest: 0, stats: null };

  async function loadHealth() {
    const state = $("health-state");
    try {
      const response = await fetch("/healthz", { cache: "no-store" });
      const body = await response.json();
      if (!response.ok || body.status !== "ok") throw new Error(body.error || "unhealthy");
      store.latest = body.latest_seq;
      state.textContent = "healthy";
      state.className = "dot ok";
      state.title = "GET /healthz answers ok";
    } catch (error) {
      state.textContent = "not answering";
      state.className = "dot bad";
      state.title = String(error.message || error);
    }
    renderFigures();
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
      button.append(el("span", "title", session.title || "(untitled)"));
      const badges = el("span", "badges");
      badges.append(badge(session.lifecycle, "lifecycle"), badge(session.chat_phase, "phase"));
      const activity = activityOf(session);
      if (activity) badges.append(badge(activity, "activity"));
      if (behindOf(session.id)) badges.append(badge("behind", "behind"));
      if (session.has_error) badges.append(badge("error", "error"));
      button.append(badges);
      const meta = [shortId(session.id), session.harness_kind, modelOf(session), when(session.updated_at)];
      button.append(el("span", "meta", meta.filter(Boolean).join(" · ")));
      button.addEventListener("click", () => {
        location.hash = `session=${encodeURIComponent(session.id)}`;
      });
      li.append(button);
      ul.append(li);
    }
  }

  // -- one session --------------------------------------------------------------------

  let transcript = null; // { id, items: Map, cursor, latest, caughtUp, busy }

  function fromHash() {
    const match = /^#session=(.+)$/.exec(location.hash);
    return match ? decodeURIComponent(match[1]) : null;
  }

  function select(id) {
    selected = id;
    renderSessions();
    $("detail-empty").hidden = Boolean(id);
    $("detail").hidden = !id;
    if (!id) return;
    transcript = { id, items: new Map(), cursor: 0, latest: 0, caughtUp: false, busy: false };
    $("transcript").replaceChildren();
    $("questions").replaceChildren();
    $("usage-rows").replaceChildren();
    $("usage-totals").replaceChildren();
    quietly(loadDetail(id));
    quietly(nextPage());
    quietly(loadUsage(id));
    quietly(loadQuestions(id));
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
    const dl = $("detail-facts");
    dl.replaceChildren();
    fact(dl, "Session", session.id);
    fact(dl, "Workspace", session.workspace_id);
    fact(dl, "Harness", [session.harness_kind, modelOf(session)].filter(Boolean).join(" · "));
    fact(dl, "State", session.state);
    fact(dl, "Created", when(session.created_at));
    fact(dl, "Updated", when(session.updated_at));
    const last = session.last_turn_outcome;
    if (last) fact(dl, "Last turn", `${last.command_id}: ${outcomeText(last.outcome)}`);
    const behind = session.projection_behind;
    $("detail-behind").hidden = !behind;
    $("detail-behind").textContent = behind
      ? `Projection behind at ordinal ${behind.ordinal} (unknown ${behind.position} ${behind.kind}): ` +
        `${behind.kept_ordinal - behind.ordinal + 1} line(s) kept in the relay log until a build that knows the kind catches up.`
      : "";
    $("detail-error").hidden = !session.has_error;
    $("detail-error").textContent = session.has_error ? session.error || "The session reports an error." : "";
  }

  // The transcript, paged as the origin's clients page it: items with seq > after_seq,
  // resumed at next_after_seq; an item that changed comes again with a higher seq.
  async function nextPage() {
    const page = transcript;
    if (!page || page.busy) return false;
    page.busy = true;
    try {
      const path = `/api/v1/sessions/${encodeURIComponent(page.id)}/transcript?after_seq=${page.cursor}&limit=${PAGE}`;
      const body = await api(path);
      if (transcript !== page) return false;
      for (const item of body.items) page.items.set(item.stable_id, item);
      page.cursor = body.next_after_seq;
      page.latest = body.latest_seq;
      page.execution = body.execution && body.execution.state;
      page.caughtUp = body.items.length === 0 || body.next_after_seq >= body.latest_seq;
      renderTranscript(page, body.items);
      return body.items.length > 0 && !page.caughtUp;
    } finally {
      page.busy = false;
    }
  }

  async function catchUp() {
    while (await nextPage()) {
      // each page renders as it arrives
    }
  }

  function renderItem(item) {
    const article = el("article", `item role-${item.role}`);
    article.dataset.stableId = item.stable_id;
    article.dataset.seq = String(item.seq);
    const head = el("header", "item-head");
    head.append(el("span", "role", roleName(item.role)), el("span", "time", clock(item.created_at_ms)));
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

  function roleName(role) {
    return { user: "You", agent: "Agent", thought: "Thinking", tool: "Tool", terminal: "Terminal", plan: "Plan", plan_proposal: "Plan proposal", system: "System" }[role] || role;
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

  function renderTranscript(page, changed) {
    const box = $("transcript");
    const stick = box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    for (const item of changed) {
      const old = box.querySelector(`article[data-stable-id="${CSS.escape(item.stable_id)}"]`);
      const fresh = renderItem(item);
      if (old) {
        old.replaceWith(fresh);
        continue;
      }
      // Keep the items in position order; pages come in seq order.
      let after = null;
      for (const node of box.children) {
        const other = page.items.get(node.dataset.stableId);
        if (other && other.position > item.position) {
          after = node;
          break;
        }
      }
      box.insertBefore(fresh, after);
    }
    if (stick && changed.length) box.scrollTop = box.scrollHeight;
    const count = page.items.size;
    $("tab-transcript-count").textContent = count ? String(count) : "";
    const where = page.caughtUp
      ? `${count} item${count === 1 ? "" : "s"} · all caught up${page.execution ? ` · ${page.execution}` : ""} · following live`
      : `${count} item${count === 1 ? "" : "s"} · through seq ${page.cursor} of ${page.latest}`;
    $("transcript-status").textContent = where;
    $("transcript-next").hidden = page.caughtUp;
    $("transcript-rest").hidden = page.caughtUp;
    if (!count && page.caughtUp) $("transcript-status").textContent = "No transcript recorded yet · following live";
  }

  async function loadUsage(id) {
    const turns = [];
    let body = null;
    let after = 0;
    for (let pages = 0; pages < 50; pages += 1) {
      body = await api(`/api/v1/sessions/${encodeURIComponent(id)}/usage?after_seq=${after}&limit=200`);
      turns.push(...body.turns);
      if (!body.turns.length || body.next_after_seq >= body.latest_seq) break;
      after = body.next_after_seq;
    }
    if (selected !== id || !body) return;
    const rows = $("usage-rows");
    rows.replaceChildren();
    turns.forEach((turn, index) => {
      const tr = el("tr");
      const usage = turn.usage || {};
      const outcome = turn.outcome || {};
      const cell = el("td");
      cell.append(badge(outcome.kind || "open", "outcome"));
      if (outcome.stop_reason) cell.append(el("span", "fine", ` ${outcome.stop_reason}`));
      if (outcome.message) cell.title = outcome.message;
      tr.append(el("td", "num", index + 1), el("td", "mono", turn.command_id), cell, el("td", null, when(turn.completed_at_ms)));
      for (const key of ["total_tokens", "input_tokens", "output_tokens", "cached_read_tokens"]) {
        tr.append(el("td", "num", tokens(usage[key])));
      }
      rows.append(tr);
    });
    if (!turns.length) {
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
    $("tab-usage-count").textContent = turns.length ? String(turns.length) : "";
  }

  async function loadQuestions(id) {
    const questions = await api(`/api/v1/sessions/${encodeURIComponent(id)}/elicitations`);
    if (selected !== id) return;
    const box = $("questions");
    box.replaceChildren();
    $("tab-questions-count").textContent = questions.length ? String(questions.length) : "";
    if (!questions.length) {
      box.append(el("p", "empty", "No question waits for an answer."));
      return;
    }
    for (const question of questions) {
      const card = el("article", "question");
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
      card.append(fields, el("p", "fine mono", question.id));
      box.append(card);
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
        return [data.command_kind || data.command_id, data.outcome].filter(Boolean).join(": ");
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

  function titleOf(id) {
    const session = list.sessions.find((s) => s.id === id);
    return session ? session.title || shortId(id) : shortId(id);
  }

  function onFeedEvent(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (_) {
      return;
    }
    const ol = $("feed");
    const li = el("li", "feed-item");
    li.dataset.seq = String(event.seq);
    const head = el("div", "feed-head");
    head.append(el("span", "seq", `#${event.seq}`), badge(event.type, "type"), el("span", "time", clock(event.recorded_at_ms)));
    li.append(head);
    const link = el("a", "feed-session", titleOf(event.session_id));
    link.href = `#session=${encodeURIComponent(event.session_id)}`;
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
      soon("transcript", () => (transcript && transcript.caughtUp ? catchUp() : Promise.resolve()));
      soon("usage", () => loadUsage(id));
      soon("questions", () => loadQuestions(id));
    }
  }

  function follow(after) {
    const state = $("feed-state");
    feed = new EventSource(`/api/v1/events?after_seq=${after}`);
    feed.addEventListener("open", () => {
      state.textContent = "live";
      state.className = "pill live";
    });
    feed.addEventListener("error", () => {
      state.textContent = "reconnecting";
      state.className = "pill waiting";
      if (feed && feed.readyState === EventSource.CLOSED) {
        feed = null;
        quietly(api("/api/v1/workspaces")); // shows the sign-in when that is why
      }
    });
    for (const kind of EVENT_KINDS) feed.addEventListener(kind, onFeedEvent);
  }

  // -- start --------------------------------------------------------------------------

  function showTab(name) {
    for (const tab of document.querySelectorAll(".tab")) tab.classList.toggle("active", tab.dataset.tab === name);
    for (const body of ["transcript", "usage", "questions"]) $(`tab-${body}`).hidden = body !== name;
  }

  async function start() {
    if (query.get("signin") === "refused") $("signin-refused").hidden = false;
    if (query.has("signin")) history.replaceState(null, "", location.pathname + location.hash);
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => showTab(tab.dataset.tab));
    $("transcript-next").addEventListener("click", () => quietly(nextPage()));
    $("transcript-rest").addEventListener("click", () => quietly(catchUp()));
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
    setInterval(() => quietly(loadHealth()), HEALTH_MS);
    setInterval(() => quietly(loadStats()), STATS_MS);
    setInterval(() => {
      if (started && transcript && transcript.caughtUp && !document.hidden) quietly(catchUp());
    }, POLL_MS);
  }

  document.addEventListener("DOMContentLoaded", () => quietly(start()));
})();
