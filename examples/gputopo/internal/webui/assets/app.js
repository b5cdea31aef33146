// gputopo serve: the page. Hand-written SVG, no library, nothing from the
// network: every request goes to this server's /api/.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";

// el makes an HTML element; svg an SVG one. attrs are attributes (class,
// id, data-*); children are nodes or strings.
function el(tag, attrs, ...children) { return build(document.createElement(tag), attrs, children); }
function svg(tag, attrs, ...children) { return build(document.createElementNS(SVGNS, tag), attrs, children); }
function build(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c !== undefined && c !== null && c !== false) e.append(c instanceof Node ? c : String(c));
  }
  return e;
}
function title(text) { return svg("title", {}, text); }

async function getJSON(path) {
  const r = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await r.json();
  if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
  return body;
}

function fmt(x, d) { return Number(x).toFixed(d); }
function gbps(bw) { return bw > 0 ? (Math.round(bw * 10) / 10) + " GB/s" : "bandwidth unknown"; }

// Colours by link kind (hue), with the width (and opacity) growing with
// the bandwidth.
const KIND = {
  NVSwitch: { color: "#6941c6", name: "NVSwitch" },
  NVLink: { color: "#079455", name: "NVLink" },
  XGMI: { color: "#e04f16", name: "xGMI" },
  PIX: { color: "#475467", name: "PCIe switch (PIX)", dash: "6 4" },
  PXB: { color: "#98a2b3", name: "PCIe switches (PXB)", dash: "3 4" },
};
const ISLAND_FILL = ["#eef4ff", "#fef6ee", "#ecfdf3", "#fdf2fa", "#f0f9ff", "#fffaeb", "#f4f3ff", "#f2f4f7"];
const OKABE_ITO = ["#e69f00", "#56b4e9", "#009e73", "#cc79a7", "#0072b2", "#d55e00", "#000000", "#f0e442"];

const state = { graph: null, busy: new Set(), chosen: new Set() };

// ---------------------------------------------------------------- node

function drawNode(g) {
  state.graph = g;
  document.getElementById("node-name").textContent = g.name ? "· " + g.name : "";
  document.getElementById("node-origin").textContent = g.origin;
  document.getElementById("node-summary").textContent = g.summary + (g.fabric ? " · multi-node NVLink domain " + g.fabric : "");
  document.getElementById("place-k").max = g.devices.length;

  const W = 120, H = 64, GAP = 22, PAD = 18, NICW = 96, NICH = 34;
  const maxBW = Math.max(1, ...g.links.map(l => l.bandwidth), ...g.switches.map(s => s.bandwidth));
  const dense = g.links.filter(l => l.kind === "NVLink" || l.kind === "XGMI").length > 12;
  const width = bw => (1.2 + 4 * Math.sqrt(bw / maxBW)) * (dense ? 0.6 : 1);

  // NUMA groups side by side: GPUs in a row, NICs below them.
  const groups = g.numa.map(n => ({
    numa: n,
    devs: g.devices.filter(d => d.numa === n),
    nics: g.nics.map((c, k) => ({ ...c, k })).filter(c => c.numa === n),
  }));
  // The fabric arcs above the row: their height grows with the span.
  const order = groups.flatMap(gr => gr.devs.map(d => d.index));
  const slot = {};
  order.forEach((d, i) => { slot[d] = i; });
  const p2p = g.links.filter(l => l.kind === "NVLink" || l.kind === "XGMI");
  const pcie = g.links.filter(l => l.kind === "PIX" || l.kind === "PXB");
  const maxSpan = Math.max(0, ...p2p.map(l => Math.abs(slot[l.a] - slot[l.b])));
  const top = 30 + (g.switches.length ? 70 : 0) + (maxSpan ? Math.min(220, 26 + 24 * maxSpan) : 0);

  const pos = {}; // device -> centre
  const nicPos = {};
  let x = PAD;
  const boxes = [];
  for (const gr of groups) {
    const cols = Math.max(gr.devs.length, Math.ceil(gr.nics.length * (NICW + GAP) / (W + GAP)), 1);
    const bw = cols * (W + GAP) - GAP + 2 * PAD;
    gr.devs.forEach((d, i) => { pos[d.index] = { x: x + PAD + i * (W + GAP) + W / 2, y: top + 40 + H / 2 }; });
    const nicStep = gr.nics.length ? (bw - 2 * PAD) / gr.nics.length : 0;
    gr.nics.forEach((c, i) => { nicPos[c.k] = { x: x + PAD + nicStep * (i + 0.5), y: top + 40 + H + (pcie.length ? 86 : 64) + NICH / 2 }; });
    const bh = 40 + H + (gr.nics.length ? (pcie.length ? 86 : 64) + NICH : (pcie.length ? 40 : 0)) + 20;
    boxes.push({ x, y: top, w: bw, h: bh, numa: gr.numa });
    x += bw + GAP;
  }
  const totalW = Math.max(x - GAP + PAD, 360);
  const totalH = top + Math.max(...boxes.map(b => b.h)) + 14;
  const root = svg("svg", { viewBox: `0 0 ${totalW} ${totalH}`, role: "img", id: "node-svg", "font-size": 12, "font-family": "system-ui, DejaVu Sans, sans-serif" });

  for (const b of boxes) {
    root.append(svg("rect", { class: "numa", x: b.x, y: b.y, width: b.w, height: b.h, rx: 10, fill: "#f9fafb", stroke: "#d0d5dd", "stroke-dasharray": b.numa < 0 ? "4 3" : null }));
  }
  // NVSwitch vertices: a bar above the devices it joins.
  g.switches.forEach((s, k) => {
    const xs = s.devices.map(d => pos[d].x);
    const x0 = Math.min(...xs) - 30, x1 = Math.max(...xs) + 30, y = 24 + k * 6;
    const c = KIND.NVSwitch.color;
    for (const d of s.devices) {
      root.append(svg("line", { x1: pos[d].x, y1: y + 30, x2: pos[d].x, y2: pos[d].y - H / 2, stroke: c, "stroke-width": width(s.bandwidth), "stroke-opacity": 0.85 },
        title(`GPU${d} — NVSwitch: ${s.label}, ${gbps(s.bandwidth)} into the fabric`)));
    }
    root.append(svg("rect", { class: "nvswitch", x: x0, y, width: x1 - x0, height: 30, rx: 6, fill: "#f4f3ff", stroke: c, "stroke-width": 1.5 }),
      svg("text", { x: (x0 + x1) / 2, y: y + 19, "text-anchor": "middle", fill: c, "font-weight": 600 },
        `NVSwitch fabric · ${s.label} · ${gbps(s.bandwidth)} per GPU`));
  });
  // Point-to-point fabric links: arcs above the devices. Each device
  // spreads its arcs' ends over its top edge, ordered by the partner's
  // place, so that the arcs fan out instead of meeting in one point.
  const ends = {};
  for (const l of p2p) {
    (ends[l.a] = ends[l.a] || []).push(l.b);
    (ends[l.b] = ends[l.b] || []).push(l.a);
  }
  for (const d in ends) ends[d].sort((p, q) => slot[p] - slot[q]);
  const anchor = (d, peer) => pos[d].x - W / 2 + (W - 24) * (ends[d].indexOf(peer) + 0.5) / ends[d].length + 12;
  for (const l of p2p) {
    const ax = anchor(l.a, l.b), bx = anchor(l.b, l.a);
    const span = Math.abs(slot[l.a] - slot[l.b]);
    const h = Math.min(top - 30 - (g.switches.length ? 70 : 0), 26 + 24 * span);
    const y0 = pos[l.a].y - H / 2;
    const k = KIND[l.kind];
    const d = `M ${ax} ${y0} C ${ax} ${y0 - h * 1.3}, ${bx} ${y0 - h * 1.3}, ${bx} ${y0}`;
    root.append(svg("path", { d, fill: "none", stroke: k.color, "stroke-width": width(l.bandwidth), "stroke-opacity": 0.35 + 0.6 * l.bandwidth / maxBW, class: "link" },
      title(`GPU${l.a} — GPU${l.b}: ${l.label}, ${gbps(l.bandwidth)}`)));
    if (p2p.length <= 8) {
      root.append(svg("text", { x: (ax + bx) / 2, y: y0 - h * 0.975 - 4, "text-anchor": "middle", fill: k.color, "font-size": 11 }, `${l.label} · ${gbps(l.bandwidth)}`));
    }
  }
  if (p2p.length > 8) {
    // Too many arcs to label each: list the link classes once.
    const classes = [...new Set(p2p.map(l => `${l.label} · ${gbps(l.bandwidth)}`))];
    root.append(svg("text", { x: PAD, y: 16, fill: "#475467", "font-size": 11 }, "fabric links: " + classes.join(", ") + " (hover an arc for its pair)"));
  }
  // PCIe switch pairs: dashed arcs below the devices.
  for (const l of pcie) {
    const a = pos[l.a], b = pos[l.b];
    const y0 = a.y + H / 2, h = 12 + 8 * Math.abs(slot[l.a] - slot[l.b]);
    const k = KIND[l.kind];
    root.append(svg("path", { d: `M ${a.x} ${y0} C ${a.x} ${y0 + h}, ${b.x} ${y0 + h}, ${b.x} ${y0}`, fill: "none", stroke: k.color, "stroke-width": 1.6, "stroke-dasharray": k.dash },
      title(`GPU${l.a} — GPU${l.b}: ${l.kind}, ${gbps(l.bandwidth)}`)));
  }
  // NICs and their nearest devices.
  g.nics.forEach((c, k) => {
    const p = nicPos[k];
    if (!p) return;
    for (const n of c.nearest) {
      root.append(svg("line", { x1: p.x, y1: p.y - NICH / 2, x2: pos[n.device].x, y2: pos[n.device].y + H / 2, stroke: "#667085", "stroke-dasharray": "1 3", "stroke-width": 1.4 },
        title(`${c.name} — GPU${n.device}: ${n.kind}`)));
    }
    root.append(svg("g", { class: "nic" },
      svg("rect", { x: p.x - NICW / 2, y: p.y - NICH / 2, width: NICW, height: NICH, rx: 17, fill: "#fff", stroke: "#667085" }),
      svg("text", { x: p.x, y: p.y - 2, "text-anchor": "middle", fill: "#344054" }, c.name),
      svg("text", { x: p.x, y: p.y + 12, "text-anchor": "middle", fill: "#667085", "font-size": 10 }, c.speedGbps ? c.speedGbps + " Gb/s NIC" : "NIC"),
      title(`${c.name}${c.numaInferred ? " (NUMA node not reported; drawn beside its nearest GPUs)" : ""}: nearest to ${c.nearest.map(n => "GPU" + n.device + " (" + n.kind + ")").join(", ") || "no GPU"}`)));
  });
  // NUMA labels over the arcs that cross them.
  for (const b of boxes) {
    root.append(svg("text", { x: b.x + 10, y: b.y + 18, fill: "#475467", "font-weight": 600, stroke: "#f9fafb", "stroke-width": 4, "paint-order": "stroke" },
      b.numa < 0 ? "NUMA unknown" : "NUMA " + b.numa));
  }
  // Devices last, over the links.
  for (const d of g.devices) {
    const p = pos[d.index];
    const model = (d.model || "").replace(/^(NVIDIA|AMD) /, "");
    const gEl = svg("g", { class: "gpu-node", id: "gpu-" + d.index, "data-device": d.index, tabindex: 0 },
      svg("rect", { class: "gpu-box", x: p.x - W / 2, y: p.y - H / 2, width: W, height: H, rx: 8, fill: ISLAND_FILL[d.island % ISLAND_FILL.length], stroke: d.healthy ? "#475467" : "#d92d20", "stroke-width": 1.5 }),
      svg("text", { x: p.x, y: p.y - 12, "text-anchor": "middle", "font-weight": 700 }, d.label),
      svg("text", { x: p.x, y: p.y + 4, "text-anchor": "middle", fill: "#344054", "font-size": 10 }, model.length > 19 ? model.slice(0, 18) + "…" : model),
      svg("text", { x: p.x, y: p.y + 19, "text-anchor": "middle", fill: "#667085", "font-size": 10 },
        [d.memoryGiB ? d.memoryGiB + " GiB" : "", "island " + d.island, d.healthy ? "" : "unhealthy"].filter(Boolean).join(" · ")),
      title(`${d.label} ${d.model || ""}\nNUMA ${d.numa < 0 ? "unknown" : d.numa} · island ${d.island} · ${d.health}${d.partition ? " · " + d.partition : ""}${d.package ? " · package " + d.package : ""}\nclick: mark busy / free`));
    gEl.addEventListener("click", () => toggleBusy(d.index));
    root.append(gEl);
  }
  root.style.maxWidth = totalW + "px"; // a small node is not blown up to the page's width
  const box = document.getElementById("node-graph");
  box.replaceChildren(root);
  paintDevices();

  // Legend: the kinds present, and the islands.
  const kinds = new Set([...g.links.map(l => l.kind), ...(g.switches.length ? ["NVSwitch"] : [])]);
  const legend = [...kinds].map(k => el("span", {}, legendLine(KIND[k]), KIND[k].name));
  if (g.nics.length) legend.push(el("span", {}, legendLine({ color: "#667085", dash: "1 3" }), "nearest NIC"));
  legend.push(el("span", { class: "muted" }, "line width and opacity grow with bandwidth; boxes are NUMA nodes; fill = fabric island: " +
    g.islands.map((is, k) => k + " {" + is.join(",") + "}").join(", ")));
  document.getElementById("node-legend").replaceChildren(...legend);
  document.getElementById("node-warnings").replaceChildren(...(g.warnings || []).map(w => el("li", {}, w)));
}

function legendLine(k) {
  const s = svg("svg", { width: 28, height: 8 }, svg("line", { x1: 1, y1: 4, x2: 27, y2: 4, stroke: k.color, "stroke-width": 3, "stroke-dasharray": k.dash }));
  return s;
}

function toggleBusy(d) {
  if (state.busy.has(d)) state.busy.delete(d); else state.busy.add(d);
  document.getElementById("place-busy").value = [...state.busy].sort((a, b) => a - b).join(",");
  paintDevices();
}

// paintDevices shows busy devices hatched and the chosen set outlined.
function paintDevices() {
  for (const g of document.querySelectorAll(".gpu-node")) {
    const d = Number(g.dataset.device);
    const r = g.querySelector(".gpu-box");
    const chosen = state.chosen.has(d), busy = state.busy.has(d);
    r.setAttribute("stroke", chosen ? "#079455" : (busy ? "#98a2b3" : "#475467"));
    r.setAttribute("stroke-width", chosen ? 4 : 1.5);
    r.setAttribute("fill-opacity", busy ? 0.35 : 1);
    g.classList.toggle("chosen", chosen);
    g.classList.toggle("busy", busy);
  }
}

// ---------------------------------------------------------------- place

async function runPlace(ev) {
  if (ev) ev.preventDefault();
  const out = document.getElementById("place-result");
  out.dataset.state = "running";
  const q = new URLSearchParams();
  q.set("gpus", document.getElementById("place-k").value);
  for (const f of ["busy", "require", "exclude", "scope"]) {
    const v = document.getElementById("place-" + f).value.trim();
    if (v) q.set(f, v);
  }
  if (document.getElementById("place-trade").checked) q.set("trade", "true");
  state.busy = new Set(document.getElementById("place-busy").value.split(",").flatMap(expandRange));
  try {
    const r = await getJSON("api/place?" + q);
    state.chosen = new Set(r.devices);
    const rows = r.components.map(c => el("tr", {}, el("td", {}, c.name), el("td", { class: "num" }, fmt(c.value, 3)), el("td", { class: "num" }, c.weight), el("td", {}, c.detail)));
    out.className = "result";
    out.replaceChildren(
      el("div", { class: "chosen", id: "place-chosen", "data-devices": r.devices.join(",") },
        "Chosen: " + r.devices.map(d => "GPU" + d).join(", ")),
      el("div", { class: "muted" }, `score ${fmt(r.score, 4)} · node score ${r.nodeScore}/100 · ${r.exact ? "proven optimal" : "collapsed-clique search, not proven optimal"} · policy ${r.policy}`),
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "component"), el("th", {}, "value"), el("th", {}, "weight"), el("th", {}, "detail"))), el("tbody", {}, rows)),
      r.runnerUp ? el("p", {}, el("b", {}, "Runner-up: "), r.runnerUp.devices.map(d => "GPU" + d).join(", "), ` (score ${fmt(r.runnerUp.score, 4)}) — lost because ${r.runnerUp.why}`)
        : el("p", { class: "muted" }, "No runner-up: this was the only candidate."));
    out.dataset.state = "done";
  } catch (e) {
    state.chosen = new Set();
    out.className = "result error";
    out.replaceChildren(el("div", { id: "place-error" }, "No placement: " + e.message));
    out.dataset.state = "error";
  }
  paintDevices();
}

function expandRange(s) {
  const [a, b] = s.trim().split("-").map(Number);
  if (s.trim() === "" || Number.isNaN(a)) return [];
  if (b === undefined || Number.isNaN(b)) return [a];
  const out = [];
  for (let i = a; i <= b && out.length < 4096; i++) out.push(i);
  return out;
}

// ---------------------------------------------------------- partitions

function drawPartitions(p) {
  document.getElementById("part-origin").textContent = p.origin;
  const CELL = 60, ROW = 30;
  const owners = new Map();
  const colorOf = o => { if (!owners.has(o)) owners.set(o, OKABE_ITO[owners.size % OKABE_ITO.length]); return owners.get(o); };
  const rows = p.mig.map(g => {
    const fits = g.profiles.filter(n => g.free[n].length);
    const noFit = g.profiles.filter(n => !g.free[n].length);
    const h = ROW + 16 + fits.length * 18 + 6;
    const s = svg("svg", { viewBox: `0 0 ${g.slots * CELL + 110} ${h}`, width: g.slots * CELL + 110, height: h, class: "mig", "font-size": 11, "font-family": "system-ui, DejaVu Sans, sans-serif" });
    for (let i = 0; i < g.slots; i++) {
      s.append(svg("rect", { x: 100 + i * CELL, y: 0, width: CELL - 2, height: ROW, fill: "#fff", stroke: "#d0d5dd" }),
        svg("text", { x: 100 + i * CELL + CELL / 2 - 1, y: ROW + 12, "text-anchor": "middle", fill: "#98a2b3", "font-size": 10 }, i));
    }
    s.append(svg("text", { x: 0, y: 19, fill: "#344054", "font-weight": 600 }, "instances"));
    for (const inst of g.instances) {
      const pl = inst.placement, busy = inst.state === "in-use";
      const c = busy ? colorOf(inst.owner || "?") : "#d0d5dd";
      s.append(svg("rect", { x: 100 + pl.start * CELL, y: 0, width: pl.size * CELL - 2, height: ROW, rx: 4, fill: c, "fill-opacity": busy ? 0.85 : 0.6, stroke: "#344054" },
        title(`${inst.profile} @ ${pl.start} (${pl.size} slots) ${inst.state}${inst.owner ? " · " + inst.owner : ""}${busy ? " · priority " + (inst.priority || 0) : ""}`)),
        svg("text", { x: 100 + pl.start * CELL + 5, y: 19, fill: busy ? "#fff" : "#344054", "font-weight": 600, "font-size": pl.size > 1 ? 11 : 10 },
          instanceLabel(inst, pl.size * CELL - 10)));
    }
    fits.forEach((n, r) => {
      const y = ROW + 18 + r * 18;
      s.append(svg("text", { x: 0, y: y + 11, fill: "#475467" }, n));
      for (const pl of g.free[n]) {
        s.append(svg("rect", { x: 100 + pl.start * CELL + 2, y, width: pl.size * CELL - 6, height: 13, rx: 3, fill: "#ecfdf3", stroke: "#079455", "stroke-dasharray": "3 2" },
          title(`${n} fits at slot ${pl.start}`)));
      }
    });
    return el("div", { class: "gpu-row" },
      el("div", { class: "name" }, g.gpu, el("small", {}, g.model), el("small", {}, `${g.freeSlots}/${g.slots} slots free · fragmentation ${fmt(g.fragmentation, 2)}`)),
      el("div", {}, s, el("div", { class: "fits" }, el("b", {}, "free placements "), "(dashed, per profile)", noFit.length ? " · does not fit: " + noFit.join(", ") : "")));
  });
  document.getElementById("part-mig").replaceChildren(p.mig.length ? el("h3", {}, "MIG layouts") : "", ...rows);
  const amd = p.amd.map(a => {
    const s = svg("svg", { viewBox: `0 0 ${a.partitions * 40} 30`, width: a.partitions * 40, height: 30, "font-size": 11, "font-family": "system-ui, DejaVu Sans, sans-serif" });
    for (let i = 0; i < a.partitions; i++) {
      const k = a.used.indexOf(i);
      s.append(svg("rect", { x: i * 40, y: 0, width: 38, height: 28, rx: 4, fill: k >= 0 ? colorOf(a.owners[k]) : "#ecfdf3", stroke: k >= 0 ? "#344054" : "#079455" },
        title(`partition ${i}: ${k >= 0 ? a.owners[k] : "free"}`)),
        svg("text", { x: i * 40 + 19, y: 18, "text-anchor": "middle", fill: k >= 0 ? "#fff" : "#067647" }, k >= 0 ? a.owners[k] : "free"));
    }
    return el("div", { class: "gpu-row" },
      el("div", { class: "name" }, a.gpu, el("small", {}, `${a.model} · ${a.compute}/${a.memory}${a.hive ? " · hive " + a.hive : ""}`),
        el("small", {}, `${a.partitions - a.used.length}/${a.partitions} partitions free`)), el("div", {}, s));
  });
  document.getElementById("part-amd").replaceChildren(p.amd.length ? el("h3", {}, "AMD partitions") : "", ...amd);
  if (!p.mig.length && !p.amd.length) document.getElementById("part-mig").replaceChildren(el("p", { class: "muted" }, "No partition layout loaded (gputopo serve --layout FILE)."));
}

// instanceLabel is an instance's profile, with its owner (or "idle")
// when that fits in px pixels.
function instanceLabel(inst, px) {
  const full = inst.profile + " " + (inst.owner || (inst.state === "in-use" ? "" : "idle"));
  return full.trim().length * 6.2 <= px ? full.trim() : inst.profile;
}

// ---------------------------------------------------------------- gang

async function loadGang(job) {
  const verdict = document.getElementById("gang-verdict");
  try {
    const v = await getJSON("api/gang" + (job ? "?job=" + encodeURIComponent(job) : ""));
    document.getElementById("gang-origin").textContent = v.origin;
    const sel = document.getElementById("gang-job");
    if (sel.options.length !== v.jobs.length) sel.replaceChildren(...v.jobs.map(j => el("option", { value: j }, j)));
    sel.value = v.job;
    const r = v.result;
    const cls = r.verdict === "fits" ? "fits-now" : r.verdict === "fits-after-release" ? "later" : "no";
    const pl = r.placement;
    verdict.replaceChildren(
      el("div", {}, el("span", { class: "verdict " + cls, id: "gang-verdict-text" }, `${v.job}: ${r.verdict}`),
        pl ? el("span", { class: "muted" }, ` · ${pl.pods.length} pods in ${pl.level ? pl.level + " " : ""}${pl.domain || "the whole cluster"}`) : ""),
      r.reasons && r.reasons.length ? el("ul", { class: "reasons" }, r.reasons.map(x => el("li", {}, x))) : "",
      pl && pl.notes && pl.notes.length ? el("ul", { class: "reasons muted" }, pl.notes.map(x => el("li", {}, x))) : "");
    document.getElementById("gang-tree").replaceChildren(drawTree(v.tree, true));
  } catch (e) {
    verdict.replaceChildren(el("p", { class: "muted" }, "No gang data: " + e.message));
  }
}

function drawTree(d, root) {
  const nodes = d.nodes.map(n => el("div", { class: "cnode" + (n.placed.some(Boolean) ? " has-placed" : "") },
    el("div", { class: "cname" }, n.name),
    el("div", { class: "gpus" }, n.held.map((h, i) => {
      const cls = n.placed[i] ? "placed" : n.release[i] ? "releasing" : h ? "held" : "free";
      const tip = `GPU${i}: ` + (n.placed[i] ? "→ " + n.placed[i] : h ? h + (n.release[i] ? " (releasing)" : "") : "free");
      return el("i", { class: "sq " + cls, title: tip });
    }))));
  return el("div", { class: root ? "domain root" : "domain" },
    el("div", { class: "dname" }, root ? "cluster" : `${d.level}: ${d.name}`),
    el("div", { class: "dbody" }, d.children.map(c => drawTree(c, false)), nodes));
}

// ------------------------------------------------------------ simulator

async function loadSim() {
  const o = document.getElementById("sim-origin");
  try {
    const s = await getJSON("api/simulate");
    o.textContent = `${s.origin}: ${s.gpus} GPUs, ${s.pods} pods, seeds ${s.seeds.join(",")}; replayed in ${fmt(s.seconds, 1)} s. Median over the seeds, band = 25–75 %. The paper's experiment: gputopo simulate --out DIR.`;
    document.getElementById("sim-chart").replaceChildren(drawChart(s.curves));
  } catch (e) {
    o.textContent = "No simulator chart: " + e.message;
  }
}

function drawChart(curves) {
  const W = 900, H = 420, L = 56, R = 170, T = 16, B = 46;
  const x0 = 75, x1 = Math.max(100, ...curves.flatMap(c => c.arrival));
  const y1 = Math.max(25, ...curves.flatMap(c => c.high.map(Math.ceil)));
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = y => T + (1 - y / y1) * (H - T - B);
  const s = svg("svg", { viewBox: `0 0 ${W} ${H}`, id: "sim-svg", "font-size": 12, "font-family": "system-ui, DejaVu Sans, sans-serif" });
  for (let x = x0; x <= x1 + 1e-9; x += 5) {
    s.append(svg("line", { x1: sx(x), x2: sx(x), y1: T, y2: H - B, stroke: "#eaecf0" }), svg("text", { x: sx(x), y: H - B + 16, "text-anchor": "middle", fill: "#475467" }, x));
  }
  for (let y = 0; y <= y1 + 1e-9; y += 5) {
    s.append(svg("line", { x1: L, x2: W - R, y1: sy(y), y2: sy(y), stroke: "#eaecf0" }), svg("text", { x: L - 8, y: sy(y) + 4, "text-anchor": "end", fill: "#475467" }, y));
  }
  s.append(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#98a2b3" }),
    svg("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", fill: "#344054" }, "Arrived workload (% of cluster GPU capacity)"),
    svg("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", fill: "#344054", transform: `rotate(-90 14 ${(T + H - B) / 2})` }, "Unallocated GPU (%)"),
    svg("polyline", { points: [[x0, 100 - x0], [100, 0], [x1, 0]].map(([x, y]) => sx(x) + "," + sy(y)).join(" "), fill: "none", stroke: "#8c8c8c", "stroke-dasharray": "2 3", "stroke-width": 1.5 }));
  const legend = [["Ideal", "#8c8c8c", "2 3"]];
  curves.forEach((c, i) => {
    const col = OKABE_ITO[i % OKABE_ITO.length];
    if (c.arrival.length > 1) {
      const ring = c.arrival.map((x, j) => sx(x) + "," + sy(c.high[j])).concat(c.arrival.map((x, j) => sx(x) + "," + sy(c.low[j])).reverse());
      s.append(svg("polygon", { points: ring.join(" "), fill: col, "fill-opacity": 0.22, stroke: "none" }));
    }
    s.append(svg("polyline", { points: c.arrival.map((x, j) => sx(x) + "," + sy(c.median[j])).join(" "), fill: "none", stroke: col, "stroke-width": 2, class: "curve" },
      title(`${c.policy}: ${fmt(c.median[c.arrival.indexOf(100)] ?? NaN, 1)} % unallocated at 100 % arrival (median)`)));
    legend.push([c.policy, col, null]);
  });
  legend.forEach(([name, col, dash], i) => {
    const y = T + 14 + i * 20;
    s.append(svg("line", { x1: W - R + 14, x2: W - R + 40, y1: y, y2: y, stroke: col, "stroke-width": 2.5, "stroke-dasharray": dash }),
      svg("text", { x: W - R + 46, y: y + 4, fill: "#344054" }, name));
  });
  return s;
}

// ----------------------------------------------------------------- start

async function start() {
  document.getElementById("place-form").addEventListener("submit", runPlace);
  document.getElementById("gang-job").addEventListener("change", e => loadGang(e.target.value));
  try {
    drawNode(await getJSON("api/node"));
  } catch (e) {
    document.getElementById("node-graph").replaceChildren(el("p", { class: "error" }, "Could not load the node: " + e.message));
  }
  await Promise.all([
    runPlace(),
    getJSON("api/partitions").then(drawPartitions).catch(e => document.getElementById("part-mig").replaceChildren(el("p", { class: "error" }, e.message))),
    loadGang(""),
    loadSim(),
  ]);
  document.body.dataset.ready = "true";
}

start();
