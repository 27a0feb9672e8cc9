// The index of a run or bench folder: every episode, filtered and sorted in the page.
"use strict";

const LW = (window.LW = {
  index: null,
  load(kind, key, payload) { if (kind === "index") receiveIndex(payload); },
});

const served = location.protocol.startsWith("http");
const POLL_MS = 2000;
let polling = false;
const sorting = { key: "task_id", dir: 1 };
const $ = (id) => document.getElementById(id);

function cell(text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  return td;
}

// The success column says what the agent achieved on its own: a person's help, a stop
// or an infrastructure fault is named, never shown as the agent's success or failure.
function outcome(row) {
  if (row.status === "running") return "running";
  if (row.outcome === "assisted") return "assisted";
  if (row.outcome === "hooked") return "hooked";
  if (row.outcome === "replayed" || row.outcome === "healed") return row.outcome;
  if (row.outcome === "stopped") return "stopped";
  if (row.outcome === "infrastructure") return "infra";
  if (row.outcome === "budget") return "budget";
  if (row.success === true) return "success";
  return row.success === false ? "failure" : row.termination;
}

function outcomeLabel(row) {
  const kind = outcome(row);
  if (kind === "assisted") return `assisted by a person (task ${row.success ? "done" : "not done"})`;
  if (kind === "hooked") {
    const done = row.success === null ? "no success check" : `task ${row.success ? "done" : "not done"}`;
    return `actions replaced by code (${row.hook_steps} step${row.hook_steps === 1 ? "" : "s"}; ${done})`;
  }
  if (kind === "infra") return `infrastructure fault (${row.error_kind || row.termination})`;
  if (kind === "replayed" || kind === "healed") {
    const done = row.termination === "diverged" ? "diverged" : `task ${row.success ? "done" : "not done"}`;
    const how = kind === "replayed" ? "replayed, no model" : `healed replay, ${row.llm_calls} model call${row.llm_calls === 1 ? "" : "s"}`;
    return `${how} (${done})`;
  }
  return kind;
}

// The episode's error, then its steps whose action failed or held no action (the
// episode went on after them, so they are no error kind of its own).
function errorsText(row) {
  const steps = [[row.action_errors, "action"], [row.parse_errors, "parse"]]
    .filter(([n]) => n).map(([n, kind]) => `${n} ${kind} error step${n === 1 ? "" : "s"}`);
  return [row.error_kind, ...steps].filter(Boolean).join(", ");
}

// An earlier attempt in a word (its ending), its error in the tooltip.
function attemptLabel(a) {
  if (a.status === "running") return "cut short";
  if (a.outcome === "infrastructure") return `infra (${a.infra_kind || a.termination})`;
  return a.outcome === "agent" ? a.termination : a.outcome;
}

// How many times the bench ran the episode, with a link to each earlier attempt (the
// row itself is the last one, the one the report counts).
function attemptsCell(attempts, last) {
  const td = cell(last ? String(attempts.length + 1) : "", "attempts");
  attempts.forEach((a, i) => {
    const link = document.createElement("a");
    link.href = a.page;
    link.textContent = `#${i + 1} ${attemptLabel(a)}`;
    link.title = a.error || a.termination;
    td.append(" ", link);
  });
  return td;
}

// The episode's answer (its last message to the user), whole in the tooltip.
function answerCell(row) {
  const td = cell(row.answer ?? "", "answer");
  if (row.answer) td.title = row.answer;
  return td;
}

// An index over several benches (linewise view A B, an improve folder) labels each row
// with its bench, in a first column the index of one folder does not have.
const several = () => !!LW.index.benches;

function matches(row) {
  const q = $("query").value.toLowerCase();
  const text = `${row.bench || ""} ${row.task_id} ${row.filter} ${row.error || ""} ${row.error_kind || ""} ${row.answer || ""} ${row.rel}`.toLowerCase();
  if (q && !text.includes(q)) return false;
  if ($("filter-name").value && row.filter !== $("filter-name").value) return false;
  if ($("bench-name").value && row.bench !== $("bench-name").value) return false;
  const wanted = $("status").value;
  if (wanted === "success") return row.agent_success === true;
  if (wanted === "failure") return row.agent_success !== true && row.status !== "running";
  if (wanted === "assisted") return row.outcome === "assisted";
  if (wanted === "hooked") return row.outcome === "hooked";
  if (wanted === "replayed" || wanted === "healed") return row.outcome === wanted;
  if (wanted === "error") return !!row.error_kind || row.action_errors + row.parse_errors > 0;
  if (wanted === "running") return row.status === "running";
  if (wanted === "not-run") return false;
  return true;
}

function compare(a, b) {
  const x = a[sorting.key], y = b[sorting.key];
  if (x === y) return 0;
  if (x === null || x === undefined) return 1;
  if (y === null || y === undefined) return -1;
  return (x < y ? -1 : 1) * sorting.dir;
}

function render() {
  const rows = LW.index.episodes.filter(matches).sort(compare);
  const body = document.querySelector("#episodes tbody");
  body.replaceChildren();
  for (const row of rows) {
    const tr = document.createElement("tr");
    tr.className = outcome(row);
    const link = document.createElement("a");
    link.href = row.page;
    link.textContent = row.task_id;
    const first = document.createElement("td");
    first.append(link);
    if (several()) tr.append(cell(row.bench, "bench"));
    tr.append(
      first, cell(row.filter), cell(row.seed ?? "", "num"),
      cell(row.problems ? `${row.status} · damaged trace` : row.status, row.problems ? "problem" : null),
      cell(outcomeLabel(row), "outcome"), answerCell(row), cell(row.steps, "num"), cell(row.tokens.toLocaleString(), "num"),
      cell(row.wall_s.toFixed(1), "num"), cell(errorsText(row)), attemptsCell(row.attempts || [], true),
    );
    if (row.error) tr.title = row.error;
    body.append(tr);
  }
  // Tasks the run set out to run that never started (it was stopped, or a budget ran out).
  const notRun = $("status").value && $("status").value !== "not-run" ? [] : LW.index.not_run || [];
  for (const entry of notRun) {
    if ($("query").value && !entry.task_id.toLowerCase().includes($("query").value.toLowerCase())) continue;
    if ($("filter-name").value && entry.filter && entry.filter !== $("filter-name").value) continue;
    if ($("bench-name").value && entry.bench !== $("bench-name").value) continue;
    const tr = document.createElement("tr");
    tr.className = "not-run";
    if (several()) tr.append(cell(entry.bench, "bench"));
    // A results line with no folder: the episode failed before its trace began.
    const aside = entry.error ? "ended without a trace"
      : entry.attempts.length ? "set aside, runs again with --resume" : "never started";
    tr.append(cell(entry.task_id), cell(entry.filter), cell(entry.seed ?? "", "num"), cell(aside),
              cell(entry.error ? "infra" : "not run", "outcome"), cell(""), cell(""), cell(""),
              cell(""), cell(entry.error || ""), attemptsCell(entry.attempts, false));
    body.append(tr);
  }
  const all = LW.index.episodes;
  const judged = all.filter((r) => r.agent_success !== null).length;
  const solved = all.filter((r) => r.agent_success === true).length;
  const aside = [["assisted", "assisted by a person"], ["hooked", "with actions replaced by code"], ["stopped", "stopped"], ["infrastructure", "infrastructure faults"], ["budget", "ended by a budget"]]
    .map(([kind, text]) => [all.filter((r) => r.outcome === kind && r.status !== "running").length, text])
    .filter(([n]) => n).map(([n, text]) => `${n} ${text}`);
  // Replays are counted apart: a program's success is not the agent's.
  const replays = all.filter((r) => (r.outcome === "replayed" || r.outcome === "healed") && r.status !== "running");
  if (replays.length) {
    const kinds = ["replayed", "healed"].map((kind) => {
      const of = replays.filter((r) => r.outcome === kind);
      return of.length ? `${of.filter((r) => r.success === true).length} of ${of.length} ${kind} succeeded` : null;
    }).filter(Boolean);
    aside.unshift(`${replays.length} replay${replays.length === 1 ? "" : "s"}: ${kinds.join(", ")}`);
  }
  if ((LW.index.not_run || []).length) aside.push(`${LW.index.not_run.length} not run`);
  // Each episode counts once, as its last attempt ended (as the report counts it).
  const earlier = [...all, ...(LW.index.not_run || [])].reduce((n, r) => n + (r.attempts || []).length, 0);
  const kind = several() ? `${LW.index.benches.length} benches` : LW.index.kind;
  $("counts").textContent = `${kind} · ${all.length} episodes · ${solved} of ${judged} judged succeeded on the agent's own` +
    (aside.length ? ` (not counted: ${aside.join(", ")})` : "") +
    (earlier ? ` · ${earlier} earlier attempt${earlier === 1 ? "" : "s"} set aside` : "") + ` · showing ${rows.length}`;
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.classList.toggle("asc", th.dataset.sort === sorting.key && sorting.dir === 1);
    th.classList.toggle("desc", th.dataset.sort === sorting.key && sorting.dir === -1);
  }
}

// The filter and bench choices, kept as chosen when the index is loaded again (served,
// a round of an improve loop that starts adds its benches).
function setOptions(select, names) {
  const known = [...select.options].map((o) => o.value).filter(Boolean);
  for (const name of names) {
    if (known.includes(name)) continue;
    const option = document.createElement("option");
    option.value = option.textContent = name;
    select.append(option);
  }
}

function receiveIndex(index) {
  for (const row of index.episodes) row.attempt_count = (row.attempts || []).length + 1;
  LW.index = index;
  setOptions($("filter-name"), [...new Set(index.episodes.map((r) => r.filter))].sort());
  if (index.benches) {
    // served, the benches' table and rounds follow them too (ran, left, success)
    setOptions($("bench-name"), index.benches.map((b) => b.label));
    $("bench-name").hidden = $("bench-head").hidden = false;
    renderStudy(index, (label) => { $("bench-name").value = label; render(); });
  }
  render();
  if (served && !polling) { polling = true; setTimeout(poll, POLL_MS); }
}

function loadIndex() {
  const script = document.createElement("script");
  script.src = `data/index.js?t=${Date.now()}`;
  script.onload = script.onerror = () => script.remove();
  document.head.append(script);
}

// Served (linewise view --serve), the page follows the folder while it is written to:
// it polls live.json (each episode's status, steps and tokens so far) and updates the
// rows in place; an episode it does not know, or one that started or ended, makes it
// load the whole index again (outcomes, answers, errors). It stops once nothing runs.
async function poll() {
  let live;
  try {
    live = await (await fetch(`data/live.json?t=${Date.now()}`, { cache: "no-store" })).json();
  } catch (e) {
    setTimeout(poll, POLL_MS); // the server is busy or restarting: try again
    return;
  }
  const rows = new Map(LW.index.episodes.map((r) => [r.key, r]));
  let reload = Object.keys(live.episodes).length !== rows.size ||
    live.not_run !== (LW.index.not_run || []).length;
  for (const [key, now] of Object.entries(live.episodes)) {
    const row = rows.get(key);
    if (!row || row.status !== now.status) { reload = true; continue; }
    row.steps = now.steps;
    row.tokens = now.tokens;
  }
  if (reload) loadIndex(); else render();
  if (live.running || reload) setTimeout(poll, POLL_MS); else polling = false;
}

for (const th of document.querySelectorAll("th[data-sort]")) {
  th.onclick = () => {
    sorting.dir = sorting.key === th.dataset.sort ? -sorting.dir : 1;
    sorting.key = th.dataset.sort;
    render();
  };
}
for (const id of ["query", "filter-name", "bench-name", "status"]) $(id).addEventListener("input", () => LW.index && render());
