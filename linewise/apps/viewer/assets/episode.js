// The episode page: one step at a time, its data loaded only when it is shown.
//
// Data arrives as scripts calling LW.load(kind, key, payload): pages opened from disk
// (file://) may load scripts but not fetch files. Served over http (linewise view
// --serve), the same scripts are answered fresh by the server, and the outline is
// re-read while the episode runs.
"use strict";

const LW = (window.LW = {
  base: document.body.dataset.base,
  key: document.body.dataset.key,
  outline: null,
  steps: new Map(),
  waiting: new Map(),
  load(kind, key, payload) {
    if (kind === "outline") receiveOutline(payload);
    else if (kind === "step") {
      LW.steps.set(payload.index, payload);
      const resolve = LW.waiting.get(payload.index);
      if (resolve) { LW.waiting.delete(payload.index); resolve(payload); }
    }
  },
});

const LINE_HEIGHT = 18;
const KEEP_STEPS = 6; // step details kept in memory (a 20,000-line tree is a few MB)
const POLL_MS = 1500;
const served = location.protocol.startsWith("http");
const $ = (id) => document.getElementById(id);
// The tree opens folded: what the filter kept comes first, dropped runs one line each.
const state = { index: 0, mode: "tree", fold: true, rows: [], found: -1, stepToken: 0 };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const script = el("script", { src });
    script.onload = () => { script.remove(); resolve(); };
    script.onerror = () => { script.remove(); reject(new Error("cannot load " + src)); };
    document.head.append(script);
  });
}

function dataUrl(file) {
  const url = `${LW.base}data/${LW.key}/${file}`;
  return served ? `${url}?t=${Date.now()}` : url;
}

function stepFile(index) { return `step-${String(index).padStart(3, "0")}.js`; }

function getStep(index) {
  if (LW.steps.has(index)) return Promise.resolve(LW.steps.get(index));
  const arrived = new Promise((resolve) => LW.waiting.set(index, resolve));
  return loadScript(dataUrl(stepFile(index))).then(() => arrived);
}

function forgetFarSteps() {
  for (const index of [...LW.steps.keys()]) {
    if (LW.steps.size <= KEEP_STEPS) break;
    if (Math.abs(index - state.index) > 1) LW.steps.delete(index);
  }
}

// ---------------------------------------------------------------- outline and stepping

function receiveOutline(outline) {
  const first = LW.outline === null;
  const before = LW.outline ? LW.outline.steps.length : 0;
  LW.outline = outline;
  renderHeader();
  renderTimeline();
  const n = outline.steps.length;
  if (first) {
    // A running episode opens on its newest step (and follows it, below), unless the
    // address names a step.
    const asked = (location.hash.match(/step=(\d+)/) || [])[1];
    const wanted = asked !== undefined ? Number(asked) : outline.summary.status === "running" ? n - 1 : 0;
    show(Math.min(Math.max(0, wanted), Math.max(0, n - 1)));
  } else if (n > before && state.index >= before - 1) {
    show(n - 1); // following a live episode: stay on its newest step
  } else if (n !== before && n) {
    $("step-label").textContent = stepLabel(state.index, n); // looking back: only the count
  }
  // An attempt set aside is no longer written to, whatever its status says.
  if (served && outline.summary.status === "running" && !outline.attempt_of) {
    setTimeout(() => loadScript(dataUrl("outline.js")).catch(() => {}), POLL_MS);
  }
}

// What the episode's ending says about the agent: only an agent outcome is its own
// success or failure; a person's help, a stop or a fault is named for what it is.
function outcomeText(s, setAside) {
  // A set-aside attempt still "running" is one whose run was killed mid-episode.
  if (s.status === "running") return setAside ? ["cut short: its run was killed", "bad"] : ["running…", "running"];
  if (s.outcome === "assisted") {
    return [`assisted by a person (${s.assisted_steps} step${s.assisted_steps === 1 ? "" : "s"}) · task ${s.success ? "done" : "not done"} · not the agent's result`, "assisted"];
  }
  if (s.outcome === "hooked") {
    return [`actions replaced by code (a hook, ${s.hook_steps} step${s.hook_steps === 1 ? "" : "s"}) · ${s.success === null ? "no success check" : `task ${s.success ? "done" : "not done"}`} · not the agent's result`, "hooked"];
  }
  if (s.outcome === "replayed" || s.outcome === "healed") {
    const how = s.outcome === "replayed" ? "replayed a recorded program, no model call"
      : `healed replay (${s.replay.healed_steps} step${s.replay.healed_steps === 1 ? "" : "s"} chosen by the model` +
        (s.replay.fell_back_at !== null ? ", then it took over" : "") + ")";
    const done = s.termination === "diverged" ? "diverged" : `task ${s.success ? "done" : "not done"}`;
    return [`${how} · ${done} · not the agent's result`, s.outcome];
  }
  if (s.outcome === "stopped") return [`stopped (${s.termination}) · not judged`, "assisted"];
  if (s.outcome === "infrastructure") return [`infrastructure fault (${s.infra_kind || s.termination}) · not judged`, "bad"];
  if (s.outcome === "budget") return [`budget (${s.budget_stop || "limit"}) · not judged`, "bad"];
  if (s.success === null) return [`${s.termination} · no success check`, ""];
  return [s.success ? "success" : `failure (${s.termination})`, s.success ? "ok" : "bad"];
}

// Why a recorded step could not be replayed as recorded (records.DivergenceReason).
const DIVERGENCE_TEXT = {
  none: "its element was found nowhere on the page",
  several: "its element matched several equal ones",
  changed_role: "its element now has another role",
  effect: "it ran without the recorded effect",
  action_error: "its action failed",
  program_ended: "the program ran out before the task ended",
  heal_failed: "the model's healing did not bring the replay back",
};

function divergenceText(reason) {
  return reason ? `${reason} (${DIVERGENCE_TEXT[reason] || "unknown reason"})` : "";
}

// The replay summary: which program, how its steps went, where and why it stopped.
function replayText(s) {
  const r = s.replay;
  const parts = [`${r.replayed_steps} replayed with no model call`,
                 `${r.healed_steps} healed by the model`,
                 `${s.tokens.llm_calls} model call${s.tokens.llm_calls === 1 ? "" : "s"} in all`];
  let where = "";
  if (r.diverged_at !== null) {
    where = `diverged at program step ${r.diverged_at + 1} of ${r.program_steps}: ${divergenceText(r.divergence)}`;
  } else if (r.fell_back_at !== null) {
    where = `healing failed at program step ${r.fell_back_at + 1} of ${r.program_steps}: the model took over as an agent`;
  }
  return el("span", {},
    el("b", {}, "replay "), `of ${r.program_steps}-step program `, el("code", {}, r.program),
    ` · ${parts.join(" · ")}`,
    where ? el("span", { class: "error" }, ` · ${where}`) : null,
    r.detail ? el("span", { class: "muted-inline" }, ` · ${r.detail}`) : null);
}

function renderHeader() {
  const o = LW.outline;
  const s = o.summary;
  $("task").textContent = `${s.task_id} · ${s.filter}`;
  $("attempt").hidden = !o.attempt_of;
  $("attempt").replaceChildren(...(o.attempt_of ? [
    el("b", {}, "earlier attempt "), "set aside when the bench ran this episode again: ",
    el("a", { href: LW.base + o.attempt_of }, "its last attempt"), " is the one counted."] : []));
  $("goal").replaceChildren(el("b", {}, "goal "), s.goal || missingGoal(s),
    s.start_url ? el("span", { class: "muted-inline" }, " · start ", el("code", {}, s.start_url)) : null);
  // An episode that ended on an error says which, above everything else: one that
  // failed to start has nothing else to show.
  const failed = s.error && s.status !== "running";
  $("error").hidden = !failed;
  $("error").replaceChildren(...(failed ? [
    el("b", {}, o.steps.length ? "ended on an error " : "failed before its first step "),
    el("span", { class: "error" }, s.error)] : []));
  $("answer").hidden = s.answer === null || s.answer === undefined;
  $("answer").replaceChildren(el("b", {}, "answer "), s.answer ?? "");
  $("replay").hidden = !s.replay;
  $("replay").replaceChildren(...(s.replay ? [replayText(s)] : []));
  const [text, cls] = outcomeText(s, !!o.attempt_of);
  const badge = $("outcome");
  badge.textContent = s.status === "running" ? text : `${text} · reward ${s.reward}`;
  badge.className = "badge " + cls;
  $("counts").textContent = countsText(o);
  const problems = $("problems");
  problems.hidden = !o.problems.length;
  problems.replaceChildren(el("b", {}, "damaged trace: "), o.problems.join(" · "),
    " (the rest of the episode is shown)");
}

// Steps and tokens: a running episode's summary counts none until it ends, so while
// it runs they are its steps' so far (the outline is re-read as steps are written).
function countsText(o) {
  const s = o.summary;
  const running = s.status === "running";
  const t = s.tokens;
  const steps = running ? o.steps.length : s.n_steps;
  const tokens = running ? o.steps.reduce((n, step) => n + step.tokens, 0)
    : t.action_prompt + t.action_completion + t.retriever_prompt + t.retriever_completion;
  return `${steps} step${steps === 1 ? "" : "s"} · ${tokens.toLocaleString()} tokens` +
    (running ? " so far" : "");
}

// The goal of a task that never reached its page: a MiniWoB++ page sets its own.
function missingGoal(s) {
  if (s.task && s.task.miniwob) return `(set by the MiniWoB++ page ${s.task.miniwob}, which never gave it)`;
  return "(none recorded)";
}

function renderTimeline() {
  const box = $("timeline");
  box.replaceChildren();
  for (const step of LW.outline.steps) {
    const human = step.operator && step.operator !== "approved";
    const cls = [step.error ? "err" : "", step.done ? "done" : "", step.misses ? "miss" : "",
                 human ? "human" : "", step.hook_replaced ? "hooked" : "", step.replay || "",
                 step.index === state.index ? "current" : ""].join(" ");
    const who = (human ? ` (a person: ${step.operator})` : "") +
      (step.hook_replaced ? " (a hook's code replaced the model's action)" : "") +
      (step.replay ? ` (${step.replay === "replayed" ? "replayed, no model call" : "healed by the model"})` : "");
    const button = el("button", { class: cls, title: `step ${step.index}: ${step.action || "no action"}${who}`,
                                  "data-index": step.index }, step.index);
    button.onclick = () => show(step.index);
    box.append(button);
  }
}

function stepLabel(index, count) { return `step ${index} (${index + 1} of ${count})`; }

async function show(index) {
  const steps = LW.outline.steps;
  if (!steps.length) {
    const ended = LW.outline.summary.status !== "running";
    $("step-label").textContent = ended ? "no step recorded" : "no steps yet";
    // Nothing to draw: no screenshot frame (a broken image), no empty panels or tree.
    document.querySelector("main.episode").hidden = ended;
    document.body.dataset.shown = "none";
    return;
  }
  document.querySelector("main.episode").hidden = false;
  index = Math.max(0, Math.min(index, steps.length - 1));
  state.index = index;
  const token = ++state.stepToken;
  // Steps are numbered from 0, as the terminal and the step-NNN files number them.
  history.replaceState(null, "", `#step=${index}`);
  $("step-label").textContent = stepLabel(index, steps.length);
  document.body.dataset.step = String(index);
  for (const b of $("timeline").children) b.classList.toggle("current", Number(b.dataset.index) === index);
  renderShot(steps[index]);
  const mode = $("step-mode");
  mode.hidden = !steps[index].replay;
  mode.textContent = steps[index].replay || "";
  mode.className = "badge " + (steps[index].replay || "");
  $("manual-after").hidden = true;
  const detail = await getStep(index);
  if (token !== state.stepToken) return; // the user moved on while it loaded
  renderReplayStep(detail);
  renderDecision(detail);
  renderFilter(detail);
  renderCalls(detail);
  renderTimings(detail);
  await renderTree(detail, true);
  document.body.dataset.shown = String(index);
  forgetFarSteps();
}

// ---------------------------------------------------------------- screenshot and box

function renderShot(step) {
  const img = $("shot-img");
  const box = $("target-box");
  box.hidden = true;
  $("shot-note").textContent = "";
  $("shot-hint").hidden = !step.screenshot;
  img.hidden = !step.screenshot; // an img without a source draws as a broken image
  if (!step.screenshot) {
    img.removeAttribute("src");
    $("shot-note").textContent = "no screenshot recorded for this step";
    return;
  }
  const place = () => {
    const t = step.target_box;
    if (!t || !img.naturalWidth) return;
    // The box is in CSS pixels of the screenshot: linewise shoots at device scale 1 (a
    // CSS pixel is an image pixel), but a cut screenshot says how many CSS pixels it
    // shows (BrowserGym's MiniWoB++ is shot at a scale of its own).
    const clip = step.screenshot_clip;
    const cssWidth = clip ? clip.width : img.naturalWidth;
    const cssHeight = clip ? clip.height : img.naturalHeight;
    const scale = img.clientWidth / cssWidth;
    const inside = t.x + t.width > 0 && t.y + t.height > 0 && t.x < cssWidth && t.y < cssHeight;
    if (!inside) { $("shot-note").textContent = "the target was outside the visible page"; return; }
    box.style.left = `${t.x * scale}px`;
    box.style.top = `${t.y * scale}px`;
    box.style.width = `${Math.max(2, t.width * scale)}px`;
    box.style.height = `${Math.max(2, t.height * scale)}px`;
    box.hidden = false;
    if (shot.classList.contains("actual")) box.scrollIntoView({ block: "center", inline: "center" });
  };
  const shot = $("shot");
  shot.onclick = () => { shot.classList.toggle("actual"); place(); };
  img.onload = place;
  window.onresize = place;
  img.src = LW.base + step.screenshot;
  if (img.complete && img.naturalWidth) place();
}

// ---------------------------------------------------------------- panels

function kv(pairs) {
  const dl = el("dl", { class: "kv" });
  for (const [k, v, cls] of pairs) {
    if (v === null || v === undefined || v === "") continue;
    dl.append(el("dt", {}, k), el("dd", { class: cls || null }, v));
  }
  return dl;
}

function renderManual(d) {
  const figure = $("manual-after");
  figure.hidden = !d.manual_after_screenshot;
  if (d.manual_after_screenshot) $("manual-after-img").src = LW.base + d.manual_after_screenshot;
  else $("manual-after-img").removeAttribute("src");
  if (!d.manual) return null;
  const { before, after } = d.manual;
  const same = before.url === after.url;
  return el("span", {}, same ? `stayed on ${after.url}` : `${before.url} → ${after.url}`,
    ` · tree ${before.axtree_lines} → ${after.axtree_lines} lines`,
    d.manual_after_screenshot ? " · the page after it is shown under the screenshot" : " · no screenshot after it");
}

const OPERATOR_TEXT = {
  approved: "approved the model's action",
  overridden: "ran another action instead of the model's",
  skipped: "skipped the model's action",
  manual: "worked in the browser by hand",
  stopped: "stopped the episode",
};

// Each element the action named: its bid on this page and its locator, in words.
function targetsList(d) {
  if (!d.targets.length) return null;
  return el("ul", { class: "targets" }, ...d.targets.map((t) => el("li", {},
    t.recorded_bid && t.recorded_bid !== t.bid ? `recorded [${t.recorded_bid}] → found [${t.bid}] `
      : `[${t.bid}] `, t.description)));
}

// A replay's step: replayed as recorded (and on which element), or healed (and why).
function renderReplayStep(d) {
  const box = $("replay-step");
  const r = d.replay;
  box.hidden = !r;
  if (!r) { box.replaceChildren(); return; }
  const steps = LW.outline.summary.replay ? LW.outline.summary.replay.program_steps : null;
  // What each recorded element's locator found on this page, described.
  const described = new Map(d.targets.map((t) => [t.bid, t.description]));
  const found = Object.entries(r.resolved).map(([from, to]) => el("li", {},
    `recorded [${from}] → found [${to}]`, described.has(to) ? `: ${described.get(to)}` : ""));
  const resolved = found.length ? el("ul", { class: "targets" }, ...found) : null;
  box.className = `panel replay-step ${r.mode}`;
  box.replaceChildren(
    el("h2", {}, "replay ", el("span", { class: `badge ${r.mode}` }, r.mode)),
    kv([
      ["how", r.mode === "replayed" ? "the recorded action ran on the element its locator found; no model was asked"
        : "the recorded step did not fit the page: the action model chose this step's action, told what the recorded step meant to do"],
      ["program step", steps === null ? String(r.program_step + 1) : `${r.program_step + 1} of ${steps}`],
      ["recorded action", r.recorded_action ? el("code", { class: "action" }, r.recorded_action) : "(after the program's last step)"],
      ["locator found", resolved],
      ["diverged", divergenceText(r.divergence), "error"],
      ["detail", r.detail],
    ]),
  );
}

function renderDecision(d) {
  $("decision").replaceChildren(
    el("h2", {}, "step"),
    kv([
      ["url", d.url], ["title", d.title],
      ["previous error", d.last_action_error, "error"],
      ["thought", d.think],
      ["action", d.action ? el("code", { class: "action" }, d.action) : null],
      [d.targets.length === 1 ? "element" : "elements", targetsList(d)],
      ["person", d.operator ? OPERATOR_TEXT[d.operator] || d.operator : null, d.operator && d.operator !== "approved" ? "human" : null],
      ["code", d.hook_replaced ? `a hook replaced the model's action (${d.action ? "ran the action above" : "ran nothing"})` : null, "hooked"],
      ["model proposed", d.model_action ? el("code", { class: "action" }, d.model_action) : null],
      ["by hand", renderManual(d)],
      ["model wrote", d.action_raw && d.action_raw !== d.action ? d.action_raw : null],
      ["parse error", d.parse_error, "error"],
      ["action error", d.action_error, "error"],
      ["repeat", d.repeat_escape],
      ["reward", String(d.reward) + (d.done ? " (done)" : "")],
      ["focused", d.focused_bid],
      ["hooks", Object.keys(d.hook_notes).length ? noteValue(d.hook_notes) : null],
    ]),
  );
}

// A filter note as a person reads it: words for keys, lists and runs of lines spelled out.
function noteValue(value) {
  if (value === null || value === undefined) return "–";
  if (Array.isArray(value)) {
    if (!value.length) return "none";
    if (value.every((v) => Array.isArray(v) && v.length === 2 && v.every(Number.isInteger))) {
      return value.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ");
    }
    return value.map((v) => (typeof v === "object" && v !== null ? noteValue(v) : String(v))).join(", ");
  }
  if (typeof value === "object") {
    return Object.entries(value).map(([k, v]) => `${k.replaceAll("_", " ")}: ${noteValue(v)}`).join("; ");
  }
  if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(3);
  return String(value);
}

function renderNotes(notes) {
  const keys = Object.keys(notes || {});
  if (!keys.length) return null;
  const list = kv(keys.map((k) => [k.replaceAll("_", " "), noteValue(notes[k])]));
  list.classList.add("notes");
  return el("details", { class: "notes" }, el("summary", {}, `filter notes (${keys.length})`), list);
}

function renderFilter(d) {
  const f = d.filter;
  const ranges = d.lines.retrieved.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ");
  const notes = renderNotes(f.notes);
  $("filter").replaceChildren(
    el("h2", {}, "filter"),
    kv([
      ["filter", f.name],
      ["lines", `${f.kept_lines || f.total_lines} kept of ${f.total_lines}` +
        (d.lines.context.length ? `, ${d.lines.context.length} ancestors added` : "") +
        (d.lines.guard.length ? `, ${d.lines.guard.length} by the recall guard` : "")],
      ["tokens", `${f.tokens_shown} shown of ${f.tokens_full} (${(100 * f.reduction).toFixed(1)} % less)`],
      ["retrieved", ranges],
      ["misses", d.lines.misses.length ? d.lines.misses.join(", ") + " (used by the action, hidden by the filter)" : null, "error"],
      ["not in the tree", d.lines.absent.length ? d.lines.absent.join(", ") + " (the action named an element no line of the page's tree has: not the filter's doing)" : null],
      ["fallback", f.fallback_reason, "error"],
      ["latency", f.latency_ms ? `${f.latency_ms.toFixed(0)} ms` : null],
    ]),
    ...(notes ? [notes] : []),
  );
}

function content(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

function renderCalls(d) {
  const box = $("calls");
  box.replaceChildren(el("h2", {}, `LLM calls (${d.llm_calls.length})`));
  for (const call of d.llm_calls) {
    const details = el("details", { class: "call" },
      el("summary", {}, `${call.purpose} · ${call.model} · ${call.prompt_tokens} + ${call.completion_tokens} tokens · ${call.latency_ms.toFixed(0)} ms` + (call.attempt ? ` · attempt ${call.attempt}` : "")));
    // Messages can be long: they are built when the call is opened, not before.
    details.addEventListener("toggle", () => {
      if (!details.open || details.dataset.filled) return;
      details.dataset.filled = "1";
      for (const m of call.messages) details.append(el("div", { class: "msg-role" }, m.role), el("pre", {}, content(m.content)));
      details.append(el("div", { class: "msg-role" }, "answer"), el("pre", {}, call.response ?? ""));
      if (call.error) details.append(el("div", { class: "error" }, call.error));
    });
    box.append(details);
  }
}

function renderTimings(d) {
  const t = d.timings;
  $("timings").replaceChildren(el("h2", {}, "timings"), kv(
    ["observe_ms", "agent_ms", "act_ms", "settle_ms", "total_ms"].map((k) => [k.replace("_ms", ""), `${t[k].toFixed(0)} ms`]),
  ));
}

// ---------------------------------------------------------------- the tree

const KEPT = 1, CONTEXT = 2, GUARD = 4, RETRIEVED = 8, MISS = 16, TARGET = 32;

function splitTree(axtree) {
  // "12|\t[34] button 'OK'": the number, then the line as the page gave it.
  return axtree === "" ? [] : axtree.split("\n").map((line) => {
    const bar = line.indexOf("|");
    return bar > 0 ? line.slice(bar + 1) : line;
  });
}

function bidOf(text) {
  const m = /^\s*\[([A-Za-z0-9]+)\]/.exec(text);
  return m ? m[1] : null;
}

function lineFlags(detail, lines) {
  const flags = new Uint8Array(lines.length + 1);
  const ls = detail.lines;
  for (const [a, b] of ls.kept) for (let n = a; n <= b && n <= lines.length; n++) flags[n] |= KEPT;
  for (const n of ls.context) flags[n] |= CONTEXT;
  for (const n of ls.guard) flags[n] |= GUARD;
  for (const [a, b] of ls.retrieved) for (let n = a; n <= b && n <= lines.length; n++) flags[n] |= RETRIEVED;
  const misses = new Set(ls.misses);
  if (misses.size || ls.target_bid) {
    for (let n = 1; n <= lines.length; n++) {
      const bid = bidOf(lines[n - 1]);
      if (bid === null) continue;
      if (misses.has(bid)) flags[n] |= MISS;
      if (bid === ls.target_bid) flags[n] |= TARGET;
    }
  }
  return flags;
}

function lineClass(f) {
  let cls = "ln " + (f & GUARD ? "guard" : f & KEPT ? "kept" : f & CONTEXT ? "context" : "dropped");
  if (f & RETRIEVED) cls += " retrieved";
  if (f & MISS) cls += " miss";
  if (f & TARGET) cls += " target";
  return cls;
}

function treeRows(detail) {
  const lines = splitTree(detail.axtree);
  const flags = lineFlags(detail, lines);
  const rows = [];
  // Folding never hides the action's target or a filter miss: those are what to look at.
  const SHOWN = KEPT | CONTEXT | GUARD | MISS | TARGET;
  for (let n = 1; n <= lines.length; n++) {
    const f = flags[n];
    if (state.fold && !(f & SHOWN)) {
      let end = n;
      while (end < lines.length && !(flags[end + 1] & SHOWN)) end++;
      const count = end - n + 1;
      const text = count === 1 ? `… 1 line dropped (${n}) …` : `… ${count} lines dropped (${n}–${end}) …`;
      rows.push({ cls: "fold", no: "", text, line: n });
      n = end;
      continue;
    }
    rows.push({ cls: lineClass(f), no: n, text: lines[n - 1], line: n });
  }
  return rows;
}

function seenRows(detail) {
  if (detail.observation === null) {
    return splitTree(detail.axtree).map((text, i) => ({ cls: "ln kept", no: i + 1, text, line: i + 1 }));
  }
  return detail.observation.split("\n").map((text, i) => ({ cls: "ln", no: i + 1, text, line: i + 1 }));
}

// A line-level diff: common head and tail trimmed, the middle by LCS when small enough,
// else by multiset (lines that appear or vanish), which stays fast on huge pages.
const LCS_CELLS = 4e6;
const DIFF_CONTEXT = 3;

function diffLines(before, after) {
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head &&
         before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
  const a = before.slice(head, before.length - tail), b = after.slice(head, after.length - tail);
  const ops = [];
  for (let i = 0; i < head; i++) ops.push(["same", after[i], i + 1]);
  if (a.length * b.length <= LCS_CELLS) {
    const w = b.length + 1;
    const table = new Uint32Array((a.length + 1) * w);
    for (let i = a.length - 1; i >= 0; i--)
      for (let j = b.length - 1; j >= 0; j--)
        table[i * w + j] = a[i] === b[j] ? table[(i + 1) * w + j + 1] + 1
          : Math.max(table[(i + 1) * w + j], table[i * w + j + 1]);
    let i = 0, j = 0;
    while (i < a.length || j < b.length) {
      if (i < a.length && j < b.length && a[i] === b[j]) { ops.push(["same", b[j], head + j + 1]); i++; j++; }
      else if (j < b.length && (i >= a.length || table[i * w + j + 1] >= table[(i + 1) * w + j])) { ops.push(["add", b[j], head + j + 1]); j++; }
      else { ops.push(["del", a[i], ""]); i++; }
    }
  } else {
    const count = new Map();
    for (const line of a) count.set(line, (count.get(line) || 0) + 1);
    const seen = new Map();
    for (const line of b) seen.set(line, (seen.get(line) || 0) + 1);
    for (const line of a) if (!seen.get(line)) ops.push(["del", line, ""]); else seen.set(line, seen.get(line) - 1);
    b.forEach((line, j) => {
      if (count.get(line)) { count.set(line, count.get(line) - 1); ops.push(["same", line, head + j + 1]); }
      else ops.push(["add", line, head + j + 1]);
    });
  }
  for (let i = after.length - tail; i < after.length; i++) ops.push(["same", after[i], i + 1]);
  return ops;
}

async function diffRows(detail) {
  if (detail.index === 0) return [{ cls: "gap", no: "", text: "the first step has no previous tree", line: 0 }];
  const previous = await getStep(detail.index - 1);
  const ops = diffLines(splitTree(previous.axtree), splitTree(detail.axtree));
  const changed = ops.map((op) => op[0] !== "same");
  const rows = [];
  let skipped = 0;
  ops.forEach(([kind, text, no], i) => {
    let near = changed[i];
    for (let k = 1; !near && k <= DIFF_CONTEXT; k++) near = changed[i - k] || changed[i + k];
    if (!near) { skipped++; return; }
    if (skipped) rows.push({ cls: "gap", no: "", text: `… ${skipped} unchanged lines …`, line: 0 });
    skipped = 0;
    rows.push({ cls: kind, no, text: (kind === "add" ? "+ " : kind === "del" ? "- " : "  ") + text, line: no || 0 });
  });
  if (skipped) rows.push({ cls: "gap", no: "", text: `… ${skipped} unchanged lines …`, line: 0 });
  if (!rows.length) rows.push({ cls: "gap", no: "", text: "the tree did not change", line: 0 });
  return rows;
}

async function renderTree(detail, newStep) {
  const rows = state.mode === "diff" ? await diffRows(detail)
    : state.mode === "seen" ? seenRows(detail) : treeRows(detail);
  if (detail.index !== state.index) return;
  state.rows = rows;
  state.found = -1;
  const ls = detail.lines;
  $("tree-note").textContent = state.mode === "tree"
    ? `${splitTree(detail.axtree).length} lines` + (ls.known ? "" : " · this trace recorded only the retriever's ranges, not every kept line")
    : state.mode === "seen" ? "the observation as the action model read it" : "lines added (+) and removed (−) since the previous step";
  const space = $("tree-space");
  space.style.height = `${rows.length * LINE_HEIGHT}px`;
  let widest = 0;
  for (const r of rows) if (r.text.length > widest) widest = r.text.length;
  space.style.width = `${widest + 12}ch`;
  space.replaceChildren();
  state.drawn = null;
  if (newStep && state.mode === "tree") scrollToTarget(false);
  drawRows();
}

function drawRows() {
  const tree = $("tree");
  const first = Math.max(0, Math.floor(tree.scrollTop / LINE_HEIGHT) - 20);
  const last = Math.min(state.rows.length, first + Math.ceil(tree.clientHeight / LINE_HEIGHT) + 40);
  if (state.drawn && state.drawn[0] === first && state.drawn[1] === last) return;
  state.drawn = [first, last];
  const frag = document.createDocumentFragment();
  for (let i = first; i < last; i++) {
    const r = state.rows[i];
    const row = el("div", { class: `row ${r.cls}${i === state.found ? " found" : ""}`, "data-line": r.line || null },
                   el("span", { class: "no" }, r.no), r.text);
    row.style.top = `${i * LINE_HEIGHT}px`;
    if (r.cls === "fold") row.onclick = () => { $("fold").checked = false; setFold(false, r.line); };
    frag.append(row);
  }
  $("tree-space").replaceChildren(frag);
}

function scrollToRow(i) {
  const tree = $("tree");
  tree.scrollTop = Math.max(0, i * LINE_HEIGHT - tree.clientHeight / 3);
  state.drawn = null;
  drawRows();
}

function scrollToTarget(always) {
  const i = state.rows.findIndex((r) => r.cls.includes("target"));
  if (i >= 0) scrollToRow(i);
  else if (always) $("tree-note").textContent += " · this step's action names no element";
}

async function setFold(fold, line) {
  state.fold = fold;
  const detail = LW.steps.get(state.index);
  if (!detail) return;
  await renderTree(detail, false);
  if (line) scrollToRow(state.rows.findIndex((r) => r.line === line));
}

function find(query) {
  if (!query) return;
  const q = query.toLowerCase();
  const n = state.rows.length;
  for (let k = 1; k <= n; k++) {
    const i = (state.found + k + n) % n;
    if (state.rows[i].text.toLowerCase().includes(q)) { state.found = i; scrollToRow(i); return; }
  }
  $("tree-note").textContent = `no line contains “${query}”`;
}

// ---------------------------------------------------------------- controls

$("tree").addEventListener("scroll", () => requestAnimationFrame(drawRows));
window.addEventListener("resize", () => { state.drawn = null; drawRows(); });
$("prev").onclick = () => show(state.index - 1);
$("next").onclick = () => show(state.index + 1);
$("fold").onchange = (e) => setFold(e.target.checked);
$("to-target").onclick = () => { if (state.mode !== "tree") setMode("tree"); else scrollToTarget(true); };
$("search").addEventListener("keydown", (e) => { if (e.key === "Enter") find(e.target.value); });
for (const b of document.querySelectorAll("[data-mode]")) b.onclick = () => setMode(b.dataset.mode);

async function setMode(mode) {
  state.mode = mode;
  for (const b of document.querySelectorAll("[data-mode]")) b.classList.toggle("on", b.dataset.mode === mode);
  const detail = LW.steps.get(state.index);
  if (detail) await renderTree(detail, true);
}

// An address edited to another #step=N shows that step (the page is not reloaded).
window.addEventListener("hashchange", () => {
  const wanted = (location.hash.match(/step=(\d+)/) || [])[1];
  if (wanted !== undefined && LW.outline) show(Number(wanted));
});

document.addEventListener("keydown", (e) => {
  if (e.target instanceof HTMLInputElement || !LW.outline) return;
  if (e.key === "ArrowRight") { show(state.index + 1); e.preventDefault(); }
  else if (e.key === "ArrowLeft") { show(state.index - 1); e.preventDefault(); }
  else if (e.key === "Home") show(0);
  else if (e.key === "End") show(LW.outline.steps.length - 1);
});
