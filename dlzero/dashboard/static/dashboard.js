// dlzero dashboard: polls /api/state and draws everything as SVG; no libraries, no network but this server.
// All text from the run's files goes into the page through textContent, never as HTML.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

function svg(tag, attrs, parent) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}

function svgText(parent, x, y, text, attrs) {
  const el = svg("text", Object.assign({ x, y }, attrs || {}), parent);
  el.textContent = text;
  return el;
}

function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (digits === undefined) digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 1 ? 2 : 4;
  return Number(x).toFixed(digits);
}

function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"; }

// ------------------------------------------------------------------ charts

function niceTicks(lo, hi, count) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const step0 = (hi - lo) / count;
  const mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0);
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * step; t += step) ticks.push(Number(t.toPrecision(12)));
  ticks.digits = Math.max(0, -Math.floor(Math.log10(step) + 1e-9));
  return ticks;
}

function tickText(t, digits) {
  const a = Math.abs(t);
  if (a >= 1e4 && digits === 0) return (t / 1000).toFixed(a >= 1e5 ? 0 : 1) + "k";
  return t.toFixed(Math.min(digits, 6));
}

// series: [{name, color, points: [{x, y, low, high, cls, title}], line: bool}]
// opts: {width, height, xLabel, yRange: [lo, hi], hlines: [{y, label}], cursorX, onClick(x), pointClass}
function lineChart(container, series, opts) {
  opts = opts || {};
  const W = opts.width || 460, H = opts.height || 240;
  const m = { l: 52, r: 12, t: 10, b: 30 };
  container.replaceChildren();
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}` }, container);
  const pts = series.flatMap((s) => s.points.filter((p) => p.y !== null && p.y !== undefined && p.x !== null));
  if (!pts.length) {
    svgText(root, W / 2, H / 2, opts.empty || "no data yet", { "text-anchor": "middle", class: "empty" });
    return root;
  }
  let xs = pts.map((p) => p.x), ys = pts.flatMap((p) => [p.y, p.low, p.high].filter((v) => v !== null && v !== undefined));
  (opts.hlines || []).forEach((h) => ys.push(h.y));
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = opts.yRange || [Math.min(...ys), Math.max(...ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
  const pad = opts.yRange ? 0 : (y1 - y0) * 0.06;
  y0 -= pad; y1 += pad;
  const X = (x) => m.l + ((x - x0) / (x1 - x0)) * (W - m.l - m.r);
  const Y = (y) => H - m.b - ((y - y0) / (y1 - y0)) * (H - m.t - m.b);
  const axis = svg("g", { class: "axis" }, root);
  const yt = niceTicks(y0, y1, 5);
  for (const t of yt) {
    svg("line", { x1: m.l, x2: W - m.r, y1: Y(t), y2: Y(t), class: "grid" }, axis);
    svgText(axis, m.l - 4, Y(t) + 3, tickText(t, yt.digits), { "text-anchor": "end" });
  }
  const xAll = niceTicks(x0, x1, 6);
  const xt = xAll.filter((t) => !opts.integerX || Number.isInteger(t));
  for (const t of xt) {
    svg("line", { x1: X(t), x2: X(t), y1: H - m.b, y2: H - m.b + 4 }, axis);
    svgText(axis, X(t), H - m.b + 14, tickText(t, opts.integerX ? 0 : xAll.digits), { "text-anchor": "middle" });
  }
  svg("path", { d: `M${m.l},${m.t} V${H - m.b} H${W - m.r}`, fill: "none" }, axis);
  if (opts.xLabel) svgText(axis, W - m.r, H - 3, opts.xLabel, { "text-anchor": "end" });
  for (const h of opts.hlines || []) {
    svg("line", { x1: m.l, x2: W - m.r, y1: Y(h.y), y2: Y(h.y), class: h.cls || "anchor-line" }, root);
    if (h.label) svgText(root, W - m.r - 2, Y(h.y) - 3, h.label, { "text-anchor": "end" });
  }
  for (const s of series) {
    const good = s.points.filter((p) => p.y !== null && p.y !== undefined && p.x !== null);
    if (s.line !== false && good.length > 1) {
      svg("polyline", { points: good.map((p) => `${X(p.x)},${Y(p.y)}`).join(" "), class: "line",
                        stroke: s.color || "#1565c0" }, root);
    }
    for (const p of good) {
      if (p.low !== null && p.low !== undefined && p.high !== null && p.high !== undefined) {
        svg("path", { d: `M${X(p.x) - 3},${Y(p.low)} h6 M${X(p.x)},${Y(p.low)} V${Y(p.high)} M${X(p.x) - 3},` +
                         `${Y(p.high)} h6`, class: "errbar" }, root);
      }
    }
    if (s.dots !== false) {
      for (const p of good) {
        const c = svg("circle", { cx: X(p.x), cy: Y(p.y), r: s.radius || 3.5,
                                  class: [s.pointClass || "", p.cls || ""].join(" ").trim(),
                                  fill: s.color || "#1565c0" }, root);
        if (p.cls) c.removeAttribute("fill");
        if (p.title) svg("title", {}, c).textContent = p.title;
      }
    }
  }
  if (opts.cursorX !== undefined && opts.cursorX !== null) {
    svg("line", { x1: X(opts.cursorX), x2: X(opts.cursorX), y1: m.t, y2: H - m.b, class: "cursor" }, root);
  }
  if (opts.onClick) {
    root.style.cursor = "pointer";
    root.addEventListener("click", (ev) => {
      const r = root.getBoundingClientRect();
      const x = x0 + ((ev.clientX - r.left - m.l) / (W - m.l - m.r)) * (x1 - x0);
      opts.onClick(x);
    });
  }
  if (series.length > 1 && opts.legend !== false) {
    series.forEach((s, i) => {
      svg("rect", { x: m.l + 8 + i * 110, y: m.t + 2, width: 10, height: 3, fill: s.color }, root);
      svgText(root, m.l + 22 + i * 110, m.t + 7, s.name);
    });
  }
  return root;
}

// ------------------------------------------------------------------ shogi board

const KANJI = { P: "歩", L: "香", N: "桂", S: "銀", G: "金", B: "角", R: "飛", K: "玉",
                "+P": "と", "+L": "杏", "+N": "圭", "+S": "全", "+B": "馬", "+R": "龍" };
const HAND_ORDER = ["R", "B", "G", "S", "N", "L", "P"];
const RANKS = "一二三四五六七八九";

// SFEN -> {squares: {"7g": {piece: "+P", black: true}}, hands: {black: {P: 2}, white: {}}, turn}
function parseSfen(sfen) {
  const [board, turn, hands] = sfen.trim().split(/\s+/);
  const squares = {};
  board.split("/").forEach((row, r) => {
    let file = 9, promoted = false;
    for (const ch of row) {
      if (ch === "+") { promoted = true; continue; }
      if (/\d/.test(ch)) { file -= Number(ch); continue; }
      const up = ch.toUpperCase();
      squares[`${file}${"abcdefghi"[r]}`] = { piece: (promoted ? "+" : "") + up, black: ch === up };
      promoted = false;
      file -= 1;
    }
  });
  const out = { black: {}, white: {} };
  if (hands && hands !== "-") {
    let count = "";
    for (const ch of hands) {
      if (/\d/.test(ch)) { count += ch; continue; }
      const side = ch === ch.toUpperCase() ? out.black : out.white;
      side[ch.toUpperCase()] = Number(count || 1);
      count = "";
    }
  }
  return { squares, hands: out, turn };
}

function drawHand(root, x, y, label, hand, white) {
  const g = svg("g", { class: `hand ${white ? "white" : "black"}` }, root);
  svgText(g, x, y, label);
  let row = 1;
  for (const p of HAND_ORDER) {
    if (!hand[p]) continue;
    const t = svgText(g, x, y + row * 22, KANJI[p] + (hand[p] > 1 ? hand[p] : ""), { class: "hand-piece",
                      "data-piece": p, "data-count": hand[p] });
    t.setAttribute("font-size", "17");
    row += 1;
  }
}

// Draws `sfen` into `container`; `lastUsi` (e.g. "7g7f" or "P*5e") highlights the destination square.
function drawBoard(container, sfen, lastUsi) {
  const C = 40, ox = 70, oy = 22;
  const W = ox + 9 * C + 80, H = oy + 9 * C + 14;
  container.replaceChildren();
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-sfen": sfen }, container);
  const pos = parseSfen(sfen);
  const at = (sq) => ({ x: ox + (9 - Number(sq[0])) * C, y: oy + "abcdefghi".indexOf(sq[1]) * C });
  if (lastUsi) {
    const to = lastUsi.slice(2, 4);
    const { x, y } = at(to);
    svg("rect", { x, y, width: C, height: C, class: "last" }, root);
  }
  for (let f = 0; f < 9; f++) {
    svgText(root, ox + f * C + C / 2, oy - 6, String(9 - f), { "text-anchor": "middle", class: "coord" });
    svgText(root, ox + 9 * C + 10, oy + f * C + C / 2 + 4, RANKS[f], { class: "coord" });
    for (let r = 0; r < 9; r++) svg("rect", { x: ox + f * C, y: oy + r * C, width: C, height: C, class: "cell" }, root);
  }
  for (const [sq, { piece, black }] of Object.entries(pos.squares)) {
    const { x, y } = at(sq);
    const cx = x + C / 2, cy = y + C / 2;
    const g = svg("g", { class: `piece ${black ? "black" : "white"}${piece[0] === "+" ? " promoted" : ""}`,
                         "data-square": sq, "data-piece": (black ? "" : "w") + piece }, root);
    if (!black) g.setAttribute("transform", `rotate(180 ${cx} ${cy})`);
    svgText(g, cx, cy + 8, KANJI[piece], { "text-anchor": "middle" });
  }
  drawHand(root, ox + 9 * C + 30, oy + 9 * C - 140, "☗", pos.hands.black, false);
  drawHand(root, 8, oy + 12, "☖", pos.hands.white, true);
  return root;
}

// ------------------------------------------------------------------ game viewers

class Viewer {
  constructor(prefix) {
    this.prefix = prefix;
    this.game = null;
    this.ply = 0;
    this.values = null;
    document.querySelectorAll(`.controls[data-for="${prefix}"] button`).forEach((b) =>
      b.addEventListener("click", () => this.step(b.dataset.step)));
  }

  load(game, atEnd) {
    this.game = game;
    this.values = game.values && game.values.some((v) => v !== null) ? game.values : null;
    $(`${this.prefix}-title`).textContent = `${game.title}: ☗${game.black} vs ☖${game.white}, ${game.result}, ` +
      `${game.moves.length} moves`;
    const list = $(`${this.prefix}-moves`);
    list.replaceChildren();
    game.moves.forEach((mv, i) => {
      const li = document.createElement("li");
      li.textContent = mv;
      li.addEventListener("click", () => this.show(i + 1));
      list.appendChild(li);
    });
    $(`${this.prefix}-value-source`).textContent = this.values ? `value: ${game.value_source}` : "";
    this.show(atEnd ? game.moves.length : 0);
  }

  setValues(values, source) {
    this.values = values;
    $(`${this.prefix}-value-source`).textContent = `value: ${source}`;
    this.drawEval();
  }

  step(kind) {
    if (!this.game) return;
    const n = this.game.moves.length;
    const to = { first: 0, prev: this.ply - 1, next: this.ply + 1, last: n }[kind];
    this.show(Math.max(0, Math.min(n, to)));
  }

  show(ply) {
    this.ply = ply;
    const g = this.game;
    drawBoard($(`${this.prefix}-board`), g.sfens[ply], ply > 0 ? g.usi[ply - 1] : null);
    $(`${this.prefix}-ply`).textContent = `ply ${ply} / ${g.moves.length}`;
    const items = $(`${this.prefix}-moves`).children;
    for (let i = 0; i < items.length; i++) items[i].classList.toggle("current", i === ply - 1);
    const list = $(`${this.prefix}-moves`);
    if (ply > 0 && items[ply - 1]) {  // scroll the list only, never the page
      const li = items[ply - 1];
      if (li.offsetTop < list.scrollTop || li.offsetTop + li.offsetHeight > list.scrollTop + list.clientHeight) {
        list.scrollTop = li.offsetTop - list.clientHeight / 2;
      }
    } else {
      list.scrollTop = 0;
    }
    this.drawEval();
  }

  drawEval() {
    const el = $(`${this.prefix}-eval`);
    if (!this.values) {
      lineChart(el, [], { width: 520, height: 150, empty: this.prefix === "gating" ? "evaluating…" : "no values" });
      return;
    }
    const pts = this.values.map((v, i) => ({ x: i, y: v }));
    lineChart(el, [{ name: "Black's win probability", color: "#333", points: pts, dots: false }],
      { width: 520, height: 150, yRange: [0, 1], xLabel: "ply", cursorX: Math.min(this.ply, pts.length - 1),
        hlines: [{ y: 0.5, cls: "grid" }], integerX: true,
        onClick: (x) => this.show(Math.max(0, Math.min(this.game.moves.length, Math.round(x)))) });
  }

  currentPosition() {
    return this.game ? "sfen " + this.game.sfens[this.ply] : null;
  }
}

// ------------------------------------------------------------------ sections

function showWarnings(list, offline) {
  const box = $("warnings");
  box.replaceChildren();
  if (offline) {
    const d = document.createElement("div");
    d.className = "warning offline";
    d.textContent = offline;
    box.appendChild(d);
  }
  for (const w of list) {
    const d = document.createElement("div");
    d.className = "warning";
    d.textContent = w;
    box.appendChild(d);
  }
}


function drawStrength(st) {
  $("strength-label").textContent = st.label;
  const title = (p) => `${p.player}: ${fmt(p.elo, 0)} Elo` +
    (p.low !== null && p.high !== null ? ` [${fmt(p.low, 0)}, ${fmt(p.high, 0)}]` : "") + `, ${p.status}`;
  const byGen = st.points.map((p) => ({ x: p.generation, y: p.elo, low: p.low, high: p.high, cls: p.status,
                                        title: title(p) }));
  const longest = Math.max(0, ...st.points.map((p) => p.wall_seconds || 0));
  const [unit, per] = longest >= 2 * 3600 ? ["hours", 3600] : ["minutes", 60];
  const byTime = st.points.map((p) => ({ x: p.wall_seconds === null ? null : p.wall_seconds / per, y: p.elo,
                                         low: p.low, high: p.high, cls: p.status, title: title(p) }));
  $("elo-time-unit").textContent = unit;
  const hlines = st.anchors.map((a) => ({ y: a.elo, label: a.player }));
  lineChart($("elo-gen"), [{ name: "Elo", color: "#1565c0", points: byGen, pointClass: "elo-point" }],
    { xLabel: "generation", hlines, integerX: true, empty: "no rated generation yet" });
  lineChart($("elo-time"), [{ name: "Elo", color: "#1565c0", points: byTime, pointClass: "elo-point" }],
    { xLabel: unit, hlines, empty: st.points.length ? "no wall times in the ratings" : "no rated generation yet" });
}

function drawTraining(rows) {
  const s = (key, color) => [{ name: key, color, points: rows.map((r) => ({ x: r.step, y: r[key] })),
                              dots: rows.length < 60 }];
  const o = { width: 300, height: 170, xLabel: "step" };
  lineChart($("chart-policy"), s("policy_loss", "#1565c0"), o);
  lineChart($("chart-value"), s("value_loss", "#c62828"), o);
  lineChart($("chart-lr"), s("lr", "#555"), o);
  lineChart($("chart-sps"), s("samples_per_s", "#1a7f37"), o);
}

function drawHeldOut(rows, shares) {
  const o = { width: 300, height: 170, xLabel: "generation", integerX: true };
  const s = (set, key, color) => ({ name: set === "next" ? "next games" : "fixed set", color,
    points: rows.filter((r) => r.set === set && r.generation !== null).map((r) => ({ x: r.generation, y: r[key] })) });
  const both = (key) => [s("next", key, "#c62828"), s("fixed", key, "#1565c0")];
  lineChart($("chart-ho-value"), both("value_loss"), Object.assign({ hlines: [{ y: 0.693, label: "constant" }] }, o));
  lineChart($("chart-ho-top1"), both("policy_acc"), o);
  lineChart($("chart-ho-policy"), both("policy_loss"), o);
  const names = Object.keys(shares || {});
  $("time-shares").textContent = names.length
    ? "Where the loop's time went (share of its wall time each phase was running; phases may overlap): " +
      names.map((k) => `${k} ${pct(shares[k])}`).join(", ")
    : "Where the loop's time went: not recorded yet (metrics/timeline.csv appears with the loop's first phase).";
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function drawSelfplay(sp) {
  const rows = sp.generations;
  const o = { width: 300, height: 170, xLabel: "generation", integerX: true };
  const s = (key, name, color) => ({ name, color, points: rows.map((r) => ({ x: r.generation, y: r[key] })) });
  lineChart($("chart-gph"), [s("games_per_hour", "games/h", "#1565c0")], o);
  lineChart($("chart-len"), [s("mean_length", "plies", "#555")], o);
  lineChart($("chart-rates"), [s("sente_win_rate", "sente wins", "#1a7f37"), s("draw_rate", "draws", "#c62828")],
    Object.assign({ yRange: [0, 1] }, o));
  const body = $("selfplay-table").tBodies[0];
  body.replaceChildren();
  for (const r of rows.slice().reverse()) {
    const tr = document.createElement("tr");
    [r.generation, r.games, r.positions, fmt(r.mean_length, 1), pct(r.sente_win_rate), pct(r.draw_rate),
     pct(r.max_moves_rate), fmt(r.games_per_hour, 0), fmt(r.positions_per_s, 1), fmt(r.playouts_per_s, 0)]
      .forEach((v) => cell(tr, v));
    body.appendChild(tr);
  }
  const rs = sp.resign;
  $("resign").textContent = rs
    ? `Resignation: threshold ${fmt(rs.threshold, 3)}; ${rs.false_positives} false positives in ${rs.checked} ` +
      `checked no-resign games (${rs.checked ? pct(rs.false_positives / rs.checked) : "–"}), over the whole run`
    : "Resignation false positives: not recorded yet (selfplay_state.json appears once no-resign games are checked).";
}

function drawModels(models) {
  const body = $("models-table").tBodies[0];
  body.replaceChildren();
  for (const m of models.slice().reverse()) {
    const tr = document.createElement("tr");
    tr.dataset.generation = m.generation;
    if (m.best) tr.className = "best";
    cell(tr, m.name + (m.best ? " ★ best" : ""), "text");
    cell(tr, m.arch || "?", "text");
    cell(tr, m.parent || "–", "text");
    cell(tr, (m.created || "").replace("T", " ").replace("+00:00", " UTC"), "text");
    cell(tr, m.games === undefined ? "?" : m.games);
    cell(tr, m.positions === undefined ? "?" : m.positions);
    cell(tr, m.gate || "–", "text");
    cell(tr, m.status, `text status-${m.status}`);
    body.appendChild(tr);
  }
}

function drawHeader(state) {
  const run = state.run;
  $("run-name").textContent = run.name;
  const best = run.best ? `best gen-${String(run.best.generation).padStart(4, "0")}` : "no best yet";
  const loop = run.loop ? `, loop iteration ${run.loop.iteration} (${run.loop.phase})` : "";
  $("run-info").textContent = `${run.path} · ${run.model} · ${best}${loop}`;
  $("status").textContent = `updated ${new Date().toLocaleTimeString()} (every ${state.refresh_seconds}s)`;
}

// ------------------------------------------------------------------ data flow

const latest = new Viewer("latest");
const gating = new Viewer("gating");
let latestKey = null;
let gatingPaths = null;
let lastJson = "";

async function getJson(url, init) {
  const res = await fetch(url, init);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}

async function loadLatest(info) {
  if (!info) {
    $("latest-title").textContent = "no self-play game yet";
    return;
  }
  if (info.key === latestKey || !$("latest-follow").checked) return;
  try {
    const game = await getJson(`/api/selfplay?path=${encodeURIComponent(info.path)}`);
    latestKey = info.key;
    latest.load(game, true);
  } catch (e) {
    $("latest-title").textContent = `cannot show ${info.path}: ${e.message}`;
  }
}

async function loadGating(path) {
  try {
    const game = await getJson(`/api/gating?path=${encodeURIComponent(path)}`);
    gating.load(game, false);
    const v = await getJson(`/api/values?kind=gating&path=${encodeURIComponent(path)}`);
    if (gating.game === game) gating.setValues(v.values, v.source);
  } catch (e) {
    $("gating-value-source").textContent = `cannot evaluate ${path}: ${e.message}`;
    if (gating.game === null) $("gating-title").textContent = `cannot show ${path}: ${e.message}`;
  }
}

function updateGatingList(games) {
  const key = games.map((g) => g.path).join("|");
  if (key === gatingPaths) return;
  gatingPaths = key;
  const sel = $("gating-select");
  const chosen = sel.value;
  sel.replaceChildren();
  for (const g of games) {
    const o = document.createElement("option");
    o.value = g.path;
    o.textContent = `${g.match} ${g.game}`;
    sel.appendChild(o);
  }
  if (!games.length) {
    $("gating-title").textContent = "no gating game yet";
    return;
  }
  if (chosen && games.some((g) => g.path === chosen)) sel.value = chosen;
  else loadGating(games[0].path);
}

async function refresh() {
  let delay = 5000;
  try {
    const state = await getJson("/api/state");
    delay = 1000 * state.refresh_seconds;
    showWarnings(state.warnings);
    drawHeader(state);
    const { generated_at, ...stable } = state;
    const json = JSON.stringify(stable);
    if (json !== lastJson) {
      lastJson = json;
      drawStrength(state.strength);
      drawTraining(state.training);
      drawHeldOut(state.heldout, state.time_shares);
      drawSelfplay(state.selfplay);
      drawModels(state.models);
      updateGatingList(state.gating_games);
      await loadLatest(state.latest_game);
    }
    document.body.dataset.loaded = "1";
  } catch (e) {
    showWarnings([], `dashboard server not reachable (${e.message}); retrying`);
  }
  setTimeout(refresh, delay);
}

$("gating-select").addEventListener("change", (ev) => loadGating(ev.target.value));
$("analyse-from-board").addEventListener("click", () => {
  const p = gating.currentPosition() || latest.currentPosition();
  if (p) $("analyse-position").value = p;
});
$("analyse-go").addEventListener("click", async () => {
  const out = $("analyse-result");
  out.textContent = "searching…";
  try {
    const a = await getJson("/api/analyse", { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ position: $("analyse-position").value, playouts: Number($("analyse-playouts").value) }) });
    if (a.error) throw new Error(a.error);
    const lines = [`best move ${a.bestmove} (${a.model}), win rate ${fmt(a.winrate, 3)} for the side to move, ` +
                   `score ${a.score_cp} cp, ${a.playouts} playouts, ${fmt(a.time_ms, 0)} ms`,
                   `PV: ${(a.pv || []).join(" ")}`];
    for (const m of a.moves || []) {
      lines.push(`  ${m.move.padEnd(6)} visits ${String(m.visits).padStart(5)}  win rate ${fmt(m.winrate, 3)}  ` +
                 `prior ${fmt(m.prior, 3)}`);
    }
    out.textContent = lines.join("\n");
  } catch (e) {
    out.textContent = `error: ${e.message}`;
  }
});
document.addEventListener("keydown", (ev) => {
  if (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT") return;
  if (ev.key === "ArrowRight") gating.step("next");
  if (ev.key === "ArrowLeft") gating.step("prev");
});
refresh();
