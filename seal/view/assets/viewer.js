"use strict";
// seal view: the episodes table, one episode turn by turn, two episodes side by side.
// Every text from the data is put on the page as a Text node (textContent), never parsed as HTML, with
// its invisible characters shown as escapes (visibleText).

// Bidi controls (U+202E shows "txt.exe" as "exe.txt"), other format characters (zero-width ones),
// control characters but tab, newline and carriage return, and the line and paragraph separators:
// each becomes a visible \uXXXX.
const INVISIBLE = /[\p{Cf}\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u2028\u2029]/gu;

function visibleText(text) {
  return text.replace(INVISIBLE, (c) => "\\u" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0"));
}

(async function () {
  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "class") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : visibleText(String(child)));
    }
    return node;
  }

  async function unpack(id) {
    const binary = atob($(id).textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  const index = await unpack("seal-index");
  const rows = index.rows;
  const sources = index.sources;
  const detailsReady = unpack("seal-details");

  // One class per label (by its rank, never its text), coloured by a rule built from the page's own colours.
  const labelClass = new Map(index.labels.map((label, k) => [label, `label-${k}`]));
  const rules = document.createElement("style");
  rules.textContent = index.labels.map((label, k) => `.label-${k} { background: ${index.colours[label]}; }`).join("\n");
  document.head.append(rules);
  const meaning = (label) => index.meanings[label] || "a label this page does not know";
  const chip = (label) => el("span", { class: `chip ${labelClass.get(label) || ""}`, title: meaning(label) }, label);
  const natural = new Intl.Collator(undefined, { numeric: true }).compare;
  $("legend").append(...index.labels.map((label) => el("li", null, chip(label), " ", meaning(label))));
  const reward = (value) => (Number.isInteger(value) ? value.toFixed(1) : String(value));
  const outcome = (row) => el("span", { class: row.pass ? "pass" : "fail" }, reward(row.reward), row.pass ? " pass" : " fail");

  // -- the table ------------------------------------------------------------------------------
  const haystacks = rows.map((row) =>
    [row.task, row.cat, sources[row.src].name, row.labels.join(" "), row.error].join(" ").toLowerCase());
  const trs = rows.map((row, i) => el("tr", { "data-id": String(i), onclick: () => openEpisode(i) },
    el("td", null, sources[row.src].name),
    el("td", null, row.step === null ? "" : row.step),
    el("td", null, row.task),
    el("td", null, row.cat),
    el("td", null, outcome(row)),
    el("td", null, row.labels.map(chip)),
    el("td", null, row.cut),
    el("td", null, row.calls),
    el("td", null, row.loop ? "loop" : ""),
    el("td", null, row.diff ? "≠ record" : (row.error ? "error" : ""))));
  const body = document.createDocumentFragment();
  body.append(...trs);
  $("episodes").tBodies[0].append(body);

  function options(select, values, names) {
    values.forEach((value, k) => select.append(el("option", { value: String(value) }, names ? names[k] : value)));
  }
  options($("f-source"), sources.map((_, k) => k), sources.map((s) => `${s.name} (${s.n})`));
  options($("f-category"), [...new Set(rows.map((r) => r.cat))].sort(natural));
  options($("f-label"), index.labels);
  options($("f-cut"), [...new Set(rows.map((r) => r.cut))]);

  function applyFilters() {
    const source = $("f-source").value, category = $("f-category").value, label = $("f-label").value;
    const result = $("f-outcome").value, cut = $("f-cut").value, loop = $("f-loop").checked;
    const diff = $("f-diff").checked, words = $("f-search").value.toLowerCase().split(/\s+/).filter(Boolean);
    let shown = 0;
    rows.forEach((row, i) => {
      const keep = (source === "" || row.src === Number(source)) && (category === "" || row.cat === category) &&
        (label === "" || row.labels.includes(label)) && (result === "" || row.pass === (result === "pass")) &&
        (cut === "" || row.cut === cut) && (!loop || row.loop) && (!diff || row.diff > 0) &&
        words.every((word) => haystacks[i].includes(word));
      trs[i].hidden = !keep;
      shown += keep ? 1 : 0;
    });
    $("count").textContent = `${shown} of ${rows.length} episodes shown`;
  }
  for (const id of ["f-source", "f-category", "f-label", "f-outcome", "f-cut", "f-loop", "f-diff", "f-search"]) {
    $(id).addEventListener("input", applyFilters);
  }
  applyFilters();

  const passes = rows.filter((r) => r.pass).length, disagree = rows.filter((r) => r.diff).length;
  $("summary").textContent = `${rows.length} episodes from ${sources.length} source(s), ${passes} pass; ` +
    (disagree ? `${disagree} replay(s) DISAGREE with the recorded result (filter "replay disagrees")` :
      "every replay agrees with the recorded result") +
    ". Conversations are rebuilt by replaying each action log through the environment.";
  sources.forEach((s) => $("sources").append(el("li", null, `${s.name}: ${s.kind}, ${s.n} episodes — ${s.path}`)));

  // -- one episode ----------------------------------------------------------------------------
  function meta(pairs) {
    return el("dl", { class: "meta" }, pairs.filter(([, value]) => value !== null && value !== undefined && value !== "")
      .map(([name, value]) => [el("dt", null, name), el("dd", null, value)]));
  }

  // A turn's rule in words; the raw evidence is one click away ("evidence (raw JSON)").
  function ruleWords(turn) {
    const rule = (turn.evidence.why || {}).rule;
    return rule === undefined ? "no rule recorded" : `${index.rules[rule] || rule} (rule ${rule})`;
  }

  // Rejected attempts and no accepted call, read by a label that counts only accepted calls.
  const NO_CALL_LABELS = new Set(["correct_abstention", "empty_turn_model_response", "missing_tool_call"]);
  function countedAsNoCall(turn) {
    return NO_CALL_LABELS.has(turn.label) && turn.steps.some((s) => s.rejected.length) &&
      !turn.steps.some((s) => s.accepted.length);
  }

  function renderEpisode(i, data) {
    const row = rows[i], detail = data.details[i], source = sources[row.src];
    const text = (k) => data.texts[k];
    const box = el("div", { class: "episode", "data-id": String(i) },
      el("h2", null, `${row.task} — ${source.name}`));
    const omega = detail.omega || {};
    const training = omega.training;
    box.append(meta([
      ["source", `${source.name} (${source.kind}) ${detail.where}`],
      ["training step", row.step === null ? "" : String(row.step)],
      ["category", row.cat],
      ["reward", outcome(row)],
      ["replayed", detail.replayed ? `reward ${reward(detail.replayed.reward)}${detail.replayed.truncated ? ", truncated" : ""}` : ""],
      ["verdict", detail.verdict ? `${detail.verdict.valid ? "valid" : detail.verdict.error_type}${detail.verdict.error_message ? ": " + detail.verdict.error_message : ""}` : ""],
      ["labels", row.labels.map(chip)],
      ["cut", row.cut],
      ["LLM calls", String(row.calls)],
      ["ends in a loop", row.loop ? "yes: the last 5 model replies are identical" : "no"],
      ["error", row.error],
      ["Ω", omega.version === undefined ? "" : `version ${omega.version} — ${omega.note}`],
      ["training Ω", training ? `version ${training.version} after step ${training.step}` +
        (training.guidelines.length ? `, ${training.guidelines.length} guideline(s)` : ", no guideline") : ""],
      ["A-Patch", omega.apatch ? `weight ${omega.apatch.weight.toFixed(3)} for these labels under ρ after step ` +
        `${omega.apatch.step} (clip ${omega.apatch.clip.join("–")}; evaluation episodes are not trained)` : ""],
    ]));
    if (detail.missing) {
      box.append(el("p", { class: "warn" }, detail.missing));
      return box;
    }
    if (detail.disagreements.length) {
      box.append(el("div", { class: "warn disagreement" }, el("strong", null, "The replay disagrees with the record: "),
        detail.disagreements.join("; ")));
    }
    const others = sources.map((s, k) => k).filter((k) => k !== row.src && occurrences(k, row.task).length);
    if (others.length) {
      const pick = el("select", { class: "compare-with" }, others.map((k) => el("option", { value: String(k) }, sources[k].name)));
      box.append(el("p", null, "Compare with ", pick, " ",
        el("button", { type: "button", class: "compare-open", onclick: () => compareTask(row.src, Number(pick.value), row.task) }, "side by side")));
    }
    box.append(el("details", null, el("summary", null, `Interface text in effect: the system prompt (Ω version ${omega.version})`),
      el("pre", null, text(detail.system))));
    if (training) {
      box.append(el("details", null, el("summary", null, `Training Ω at step ${training.step} (version ${training.version})`),
        el("pre", null, [training.system_suffix || "(no system text)", ...training.guidelines.map((g) => "• " + g)].join("\n"))));
    }
    let reply = 0;
    detail.turns.forEach((turn, t) => {
      const div = el("div", { class: "turn", "data-turn": String(t) },
        el("h3", null, `Turn ${t} `, chip(turn.label)),
        el("p", { class: "why" }, "diagnosis: ", ruleWords(turn)));
      if (countedAsNoCall(turn)) div.append(el("p", { class: "why counted" }, "rejected: counted as no call"));
      turn.user.forEach((m) => div.append(el("div", { class: "msg-user" }, el("div", { class: "note" }, `user message (${m.role})`), el("pre", null, text(m.text)))));
      if (!turn.evidence.reached) div.append(el("p", { class: "note" }, "The model never reached this turn."));
      turn.steps.forEach((step) => {
        div.append(el("div", { class: "msg-reply" }, el("div", { class: "note" }, `model reply #${reply} (raw text, as sent)`),
          el("pre", { class: "reply" }, text(step.reply))));
        reply += 1;
        const calls = [
          ...step.accepted.map((c) => el("li", { class: "accepted" }, `✓ ${c.name}(${JSON.stringify(c.arguments)})`)),
          ...step.rejected.map((c) => el("li", { class: "rejected" }, `✗ rejected ${c.name || "(the whole message)"}: ${c.reason}`)),
          ...step.errors.map((c) => el("li", { class: "error" }, `! ${c.name} returned an error: ${c.error}`)),
        ];
        if (step.ended) calls.push(el("li", null, "no tool-call markup: the reply ends the user turn"));
        div.append(el("ul", { class: "calls" }, calls));
        step.served.forEach((m) => div.append(el("div", { class: "msg-served" }, el("div", { class: "note" }, `environment (${m.role})`), el("pre", null, text(m.text)))));
      });
      div.append(el("details", null, el("summary", null, "evidence (raw JSON)"), el("pre", null, JSON.stringify(turn.evidence, null, 1))));
      box.append(div);
    });
    if (detail.unplayed) box.append(el("p", { class: "note" }, `${detail.unplayed} logged repl(ies) after the episode ended, never played.`));
    return box;
  }

  async function openEpisode(i) {
    const data = await detailsReady;
    trs.forEach((tr) => tr.classList.remove("selected"));
    trs[i].classList.add("selected");
    $("detail").replaceChildren(renderEpisode(i, data));
    $("detail").hidden = false;
    $("compare").hidden = true;
    $("detail").scrollIntoView();
  }

  // -- the compare view -----------------------------------------------------------------------
  const bySource = sources.map(() => new Map());
  rows.forEach((row, i) => {
    const found = bySource[row.src].get(row.task) || [];
    bySource[row.src].set(row.task, [...found, i]);
  });
  const occurrences = (source, task) => bySource[source].get(task) || [];
  const names = sources.map((s) => s.name);
  options($("c-left"), sources.map((_, k) => k), names);
  options($("c-right"), sources.map((_, k) => k), names);
  if (sources.length > 1) $("c-right").value = "1";

  function compareTasks() {
    const left = Number($("c-left").value), right = Number($("c-right").value);
    const shared = [...bySource[left].keys()].filter((task) => bySource[right].has(task)).sort(natural);
    $("c-task").replaceChildren(...shared.map((task) => el("option", { value: task }, task)));
  }
  $("c-left").addEventListener("input", compareTasks);
  $("c-right").addEventListener("input", compareTasks);
  compareTasks();
  $("c-show").addEventListener("click", () => compareTask(Number($("c-left").value), Number($("c-right").value), $("c-task").value));

  async function compareTask(left, right, task) {
    const data = await detailsReady;
    $("c-left").value = String(left);
    $("c-right").value = String(right);
    compareTasks();
    $("c-task").value = task;
    const pair = [occurrences(left, task)[0], occurrences(right, task)[0]];
    const section = $("compare");
    if (pair.includes(undefined)) {
      section.replaceChildren(el("p", { class: "warn" }, `${task || "no task"} is not in both sources`));
    } else {
      const turns = Math.max(...pair.map((i) => rows[i].labels.length));
      const table = el("table", { class: "turn-labels" }, el("tr", null, el("th", null, "turn"), pair.map((i) => el("th", null, sources[rows[i].src].name))));
      for (let t = 0; t < turns; t++) {
        table.append(el("tr", null, el("td", null, String(t)), pair.map((i) => el("td", null, rows[i].labels[t] ? chip(rows[i].labels[t]) : ""))));
      }
      section.replaceChildren(el("h2", null, `${task}: ${sources[left].name} vs ${sources[right].name}`), table,
        el("div", { class: "cols" }, pair.map((i) => el("div", { class: "side" }, renderEpisode(i, data)))));
    }
    section.hidden = false;
    $("detail").hidden = true;
    section.scrollIntoView();
  }

  await detailsReady;
  window.sealView = { ready: true, loadMs: performance.now() };
  document.body.dataset.ready = "true";
})();
