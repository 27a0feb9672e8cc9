// The head of an index over several benches (linewise view A B, an improve folder): an
// improve folder's rounds, then the benches with their state and success as their
// reports give them, each leading to its own index and report. The episode table below
// is index.js's, each row labelled with its bench.
"use strict";

function studyNode(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) node.setAttribute(k, v);
  for (const child of children) node.append(child instanceof Node ? child : String(child ?? ""));
  return node;
}

function studyTable(id, header, rows) {
  return studyNode("table", { id, class: "episodes study-table" },
    studyNode("thead", {}, studyNode("tr", {}, ...header.map((h) => studyNode("th", {}, h)))),
    studyNode("tbody", {}, ...rows));
}

// An improve folder's rounds, as improve.md gives them, each bench's cell leading to it.
function roundsTable(index, byLabel) {
  const skills = index.rounds.some((r) => r.skills !== null || r.parts["test-skills"]);
  const header = ["round", "memory entries (from the pruner)", "train success % ± SE", "test success % ± SE",
                  ...(skills ? ["skills", "test with skills % ± SE"] : [])];
  const part = (row, name) => {
    const p = row.parts[name];
    if (!p) return studyNode("td", {}, "–");
    const bench = byLabel.get(p.label);
    return studyNode("td", { class: "round-part", "data-bench": p.label },
      studyNode("a", { href: bench.index }, p.success), p.running ? " (no end recorded yet)" : "");
  };
  const rows = index.rounds.map((row) => studyNode("tr", { "data-round": row.round },
    studyNode("td", {}, row.round === 0 ? "0 (no memory)" : String(row.round)),
    studyNode("td", {}, row.memory_entries), part(row, "train"), part(row, "test"),
    ...(skills ? [studyNode("td", {}, row.skills ?? "–"), part(row, "test-skills")] : [])));
  return studyTable("rounds", header, rows);
}

// The benches: each one's state (planned, ran, left, why it stopped), success and
// errors; its name opens its own index, "episodes" shows its rows below.
function benchesTable(index, showBench) {
  const reports = index.benches.some((b) => b.report); // an improve loop writes none
  const header = ["bench", "state", "planned", "ran", "left", "agent outcomes (n)", "success % ± SE",
                  "infra endings", "errors", ...(reports ? [""] : []), ""];
  const rows = index.benches.map((b) => {
    const show = studyNode("button", { type: "button" }, "its episodes below");
    show.onclick = () => showBench(b.label);
    return studyNode("tr", { class: b.complete ? "complete" : "incomplete", "data-bench": b.label, title: b.path },
      studyNode("td", {}, studyNode("a", { href: b.index }, b.label)),
      studyNode("td", { class: "state-text", title: b.state.join("\n") }, b.state[0] || ""),
      studyNode("td", { class: "num" }, b.planned ?? "?"), studyNode("td", { class: "num" }, b.ran),
      studyNode("td", { class: "num" }, b.planned === null ? "?" : b.left),
      studyNode("td", { class: "num" }, b.agent_outcomes), studyNode("td", {}, b.success),
      studyNode("td", {}, b.infrastructure), studyNode("td", {}, b.errors),
      ...(reports ? [studyNode("td", {}, b.report ? studyNode("a", { href: b.report }, "report") : "")] : []),
      studyNode("td", {}, show));
  });
  return studyTable("benches", header, rows);
}

function renderStudy(index, showBench) {
  const box = document.getElementById("study");
  const byLabel = new Map(index.benches.map((b) => [b.label, b]));
  const parts = [];
  if (index.comparison) {
    parts.push(studyNode("p", {}, "Side by side, task by task: ",
      studyNode("a", { href: index.comparison, id: "comparison" }, "the comparison report"), "."));
  }
  if (index.rounds) parts.push(studyNode("h2", {}, "Rounds"), roundsTable(index, byLabel));
  parts.push(studyNode("h2", {}, "Benches"), benchesTable(index, showBench),
             studyNode("h2", {}, "Episodes"));
  box.replaceChildren(...parts);
  box.hidden = false;
}
