// Front end of the tensprov-lab lineage explorer (an anywidget ESM module).
//
// Python owns the state and runs every query (tensprov_lab/notebook/_widget.py); this
// module only draws the synced traits and reports what the user clicked:
//   traits it reads:  graph, selected, details, records, lineage, coarse, focus,
//                     search, matches, dropped, edited, what_if, error
//   traits it sets:   selected, coarse, focus, search
//   messages it sends: {type: "page", page}, {type: "record", row, node} (a click on a
//                      row number), {type: "cell", row, column, node} (a click on a
//                      value), {type: "lineage_rows", node}, {type: "clear"},
//                      {type: "drop", node, row, on} (a what-if checkbox),
//                      {type: "edit", node, row, column, value} (a value typed into a
//                      source's records table after a double-click; Python converts the
//                      text to the column's type, the original value undoes the edit),
//                      {type: "what_if"}, {type: "clear_what_if"}
// Node positions come from the Python Sugiyama layout (preset layout, never recomputed
// here) so the widget and the static SVG show the same picture.

import cytoscape from "cytoscape";

let instances = 0;

/** Create an element with a class and optional text (never innerHTML: values are data). */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function fmtCount(n) {
  return n === null || n === undefined ? "?" : Number(n).toLocaleString("en-US");
}

function fmtCell(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

/** A value as the text of an edit box: null is the empty text. */
function editText(v) {
  return v === null || v === undefined ? "" : fmtCell(v);
}

function plural(n, word) {
  return `${fmtCount(n)} ${word}${n === 1 ? "" : "s"}`;
}

const STYLE = [
  {
    selector: "node",
    style: {
      shape: "data(shape)",
      width: "data(w)",
      height: "data(h)",
      "background-color": "data(fill)",
      "border-color": "data(border)",
      "border-width": "data(border_width)",
      "border-style": "data(border_style)",
      label: "data(display)",
      color: "data(text)",
      "font-size": 11,
      "font-family": "Helvetica, Arial, sans-serif",
      "text-wrap": "wrap",
      "text-max-width": "data(w)",
      "text-valign": "center",
      "text-halign": "center",
    },
  },
  {
    selector: "edge",
    style: {
      width: 1.4,
      "curve-style": "straight",
      "line-color": "#94a3b8",
      "target-arrow-color": "#94a3b8",
      "target-arrow-shape": "triangle",
      "arrow-scale": 0.9,
      label: "data(label)",
      "font-size": 10,
      color: "#334155",
      "text-background-color": "#ffffff",
      "text-background-opacity": 0.85,
      "text-background-padding": 2,
    },
  },
  {
    // bend points from the Python layout (weights/distances set per edge)
    selector: "edge.bent",
    style: { "curve-style": "segments", "edge-distances": "node-position" },
  },
  { selector: "node.focus", style: { "background-color": "#fdba74", "border-color": "#c2410c" } },
  {
    selector: "node.match",
    style: { "outline-color": "#eab308", "outline-width": 5, "outline-opacity": 0.9 },
  },
  {
    selector: "node.picked",
    style: { "overlay-color": "#2563eb", "overlay-opacity": 0.18, "overlay-padding": 5 },
  },
  { selector: ".dim, .wi-dim", style: { opacity: 0.3 } },
  {
    selector: "node.lin-backward",
    style: { "underlay-color": "#dc2626", "underlay-opacity": 0.35, "underlay-padding": 6 },
  },
  {
    selector: "node.lin-forward",
    style: { "underlay-color": "#16a34a", "underlay-opacity": 0.35, "underlay-padding": 6 },
  },
  {
    selector: "node.lin-origin",
    style: { "underlay-color": "#7c3aed", "underlay-opacity": 0.45, "underlay-padding": 7 },
  },
  {
    selector: "edge.lin",
    style: { width: 3, "line-color": "#dc2626", "target-arrow-color": "#dc2626" },
  },
  // why-not: the operation where a picked source record stopped
  marked("node.lin-stopped", [3, "#b45309", "dashed"], { halo: ["#f59e0b", 0.4], opacity: 1 }),
  // what-if preview: the sources losing records, what changes downstream, what cannot be
  // previewed (border styles too, so that the three read apart without colour)
  marked("node.wi-dropped", [3, "#9f1239", "double"], { halo: ["#e11d48", 0.3] }),
  marked("node.wi-edited", [3, "#6d28d9", "double"], { halo: ["#8b5cf6", 0.3] }),
  marked("node.wi-changed", [3, "#b45309"], { halo: ["#f59e0b", 0.45] }),
  // a diff view (RunDiff.explore()): what was added or changed since the earlier run
  marked("node.diff-added", [3, "#15803d", "double"], { outline: "#22c55e" }),
  marked("node.diff-changed", [3, "#b45309", "dashed"], { outline: "#f59e0b" }),
  marked("node.wi-not_previewable", [2, "#475569", "dashed"], { halo: ["#64748b", 0.3] }),
];

// A node marked by a border [width, colour, line] and a halo [colour, opacity] (an
// underlay) or an outline of another colour.
function marked(selector, [width, color, line], { halo, outline, opacity }) {
  const style = { "border-width": width, "border-color": color };
  if (line) style["border-style"] = line;
  if (halo) {
    Object.assign(style, {
      "underlay-color": halo[0], "underlay-opacity": halo[1], "underlay-padding": 6,
    });
  }
  if (outline) {
    Object.assign(style, { "outline-color": outline, "outline-width": 4, "outline-opacity": 0.6 });
  }
  if (opacity !== undefined) style.opacity = opacity;
  return { selector, style };
}

function render({ model, el }) {
  const uid = `tp-explorer-${++instances}-${Math.random().toString(36).slice(2, 8)}`;
  el.classList.add("tp-explorer");

  // -- skeleton ------------------------------------------------------------------------
  const toolbar = h("div", "tp-toolbar");
  const title = h("span", "tp-title");
  const coarseLabel = h("label", "tp-toggle");
  const coarseBox = h("input");
  coarseBox.type = "checkbox";
  coarseLabel.append(coarseBox, " datasets only");
  const rollupLabel = h("label", "tp-toggle");
  const rollupBox = h("input");
  rollupBox.type = "checkbox";
  rollupLabel.append(rollupBox, " roll up chains");
  rollupLabel.title = "Draw each chain of 3+ row-preserving steps (withColumn, select …) as one stage";
  const focusBtn = h("button", "tp-btn", "Focus on selected");
  focusBtn.title = "Show only the ancestors and descendants of the selected node";
  const unfocusBtn = h("button", "tp-btn", "Whole graph");
  const fitBtn = h("button", "tp-btn", "Fit");
  const search = h("input", "tp-search");
  search.type = "search";
  search.placeholder = "search attribute…";
  search.setAttribute("list", `${uid}-columns`);
  search.setAttribute("aria-label", "attribute search");
  const columns = h("datalist");
  columns.id = `${uid}-columns`;
  const matchInfo = h("span", "tp-matches");
  toolbar.append(title, coarseLabel, rollupLabel, focusBtn, unfocusBtn, fitBtn, search, columns, matchInfo);
  // what the colours and borders mean (node styles of this graph, and lineage marks)
  const legendBox = h("details", "tp-legend");
  legendBox.append(h("summary", "", "legend"));
  const legendItems = h("div", "tp-legend-items");
  legendBox.append(legendItems);

  const diffBar = h("div", "tp-diff");
  const errorBar = h("div", "tp-error");
  const main = h("div", "tp-main");
  const canvas = h("div", "tp-graph");
  const side = h("div", "tp-side");
  const detailsBox = h("div", "tp-details");
  const lineageBox = h("div", "tp-lineage");
  side.append(detailsBox, lineageBox);
  // an overview of the whole graph (past a few nodes): the visible part outlined, a click
  // moves the view there
  const graphWrap = h("div", "tp-graph-wrap");
  const overview = h("canvas", "tp-overview");
  overview.width = 168;
  overview.height = 96;
  overview.title = "overview: click to move the view there";
  graphWrap.append(canvas, overview);
  main.append(graphWrap, side);
  const recordsBox = h("div", "tp-records");
  const whatIfBox = h("div", "tp-whatif");
  el.append(toolbar, diffBar, errorBar, main, legendBox, recordsBox, whatIfBox);

  const cy = cytoscape({
    container: canvas,
    elements: [],
    style: STYLE,
    layout: { name: "preset" },
    autoungrabify: true, // positions belong to the Python layout
    boxSelectionEnabled: false,
    minZoom: 0.1,
    maxZoom: 3,
  });

  // cytoscape caches where its container is on the page and forgets it only on a resize
  // or a scroll of the ancestors the container had when cytoscape started (the output
  // area attaches it later): once the notebook scrolls or reflows, clicks would land on
  // the wrong node. Forget it on every press, before cytoscape reads it.
  const forgetBox = () => cy.renderer().invalidateContainerClientCoordsCache();
  for (const ev of ["mousedown", "pointerdown", "touchstart", "wheel"]) {
    canvas.addEventListener(ev, forgetBox, { capture: true, passive: true });
  }

  // Test hooks (tests/test_browser.py): the cytoscape instance, to find where nodes are
  // drawn on the canvas, and data-highlight-ms / data-highlight-seq on the element: the
  // time from a click on a record or a cell to the first graph render showing its lineage.
  el.__tensprov_cy = cy;
  let clickedAt = null;
  let highlights = 0;

  function send(msg) {
    model.send(msg);
  }
  function setTrait(name, value) {
    model.set(name, value);
    model.save_changes();
  }

  // -- diff view: the legend of the marks, and what the earlier run had and this lacks --
  function drawDiff(diff) {
    diffBar.replaceChildren();
    diffBar.style.display = diff ? "" : "none";
    if (!diff) return;
    const added = h("span", "tp-diff-added", "added");
    const changed = h("span", "tp-diff-changed", "changed");
    diffBar.append(h("b", null, diff.summary), " — outlined: ", added, ", ", changed);
    if (diff.removed && diff.removed.length) {
      const list = h("ul", "tp-diff-removed");
      for (const r of diff.removed) {
        list.append(h("li", null, `removed ${r.dataset}: ${r.expression}`));
      }
      diffBar.append(list);
    }
  }

  // -- graph ---------------------------------------------------------------------------
  function drawGraph() {
    const g = model.get("graph") || {};
    const nodes = g.nodes || [];
    const edges = g.edges || [];
    title.textContent = g.title || "";
    drawDiff(g.diff);
    cy.batch(() => {
      cy.elements().remove();
      cy.add(
        nodes.map((n) => ({
          group: "nodes",
          data: {
            ...n.style,
            id: n.id,
            kind: n.kind,
            w: n.w,
            h: n.h,
            label: n.label,
            display: n.label,
          },
          position: { x: n.x, y: n.y },
          classes: [n.kind, n.focus ? "focus" : "", n.opaque ? "opaque" : "",
            n.diff ? `diff-${n.diff}` : ""].join(" "),
        })),
      );
      for (const e of edges) {
        const edge = cy.add({
          group: "edges",
          data: { id: e.id, source: e.source, target: e.target, label: e.label || "" },
        });
        if (e.weights && e.weights.length) {
          edge.addClass("bent");
          edge.style({
            "segment-weights": e.weights.join(" "),
            "segment-distances": e.distances.join(" "),
          });
        }
      }
    });
    columns.replaceChildren(
      ...(g.columns || []).map((c) => {
        const opt = h("option");
        opt.value = c;
        return opt;
      }),
    );
    coarseBox.checked = !!model.get("coarse");
    rollupBox.checked = !!model.get("rollup");
    showLegend(g.legend || []);
    unfocusBtn.disabled = !model.get("focus");
    fitLegibly();
    drawOverview();
    showSelected();
    showMatches();
    showLineage();
    showWhatIf();
  }

  // A node's text: its label, the size of the lineage it holds ("● n": records, or cells
  // for a picked cell) and the what-if change of its records ("−removed ~changed +added").
  function relabel() {
    const counts = (model.get("lineage") || {}).counts || {};
    const wi = model.get("what_if") || {};
    const delta = {};
    for (const d of wi.datasets || []) {
      const n = d.counts || {};
      if (d.node && d.status === "changed") delta[d.node] = `−${n.removed} ~${n.changed} +${n.added}`;
      if (d.node && d.status === "not_previewable") delta[d.node] = "? not previewable";
    }
    for (const d of wi.drop || []) if (d.node) delta[d.node] = `✕ ${d.rows.length} dropped`;
    const edits = {};
    for (const e of wi.edit || []) if (e.node) edits[e.node] = (edits[e.node] || 0) + 1;
    for (const [node, n] of Object.entries(edits)) {
      delta[node] = `${delta[node] ? `${delta[node]} ` : ""}✎ ${n} edited`;
    }
    cy.batch(() => {
      cy.nodes().forEach((n) => {
        let text = n.data("label");
        const c = counts[n.id()];
        if (c !== undefined) text += `\n● ${fmtCount(c)}`;
        if (delta[n.id()]) text += `\n${delta[n.id()]}`;
        n.data("display", text);
      });
    });
  }

  function showSelected() {
    const sel = model.get("selected");
    cy.nodes().removeClass("picked");
    if (sel) cy.getElementById(sel).addClass("picked");
    focusBtn.disabled = !sel;
  }

  function showMatches() {
    const matches = model.get("matches") || [];
    cy.nodes().removeClass("match");
    for (const id of matches) cy.getElementById(id).addClass("match");
    const text = model.get("search");
    matchInfo.textContent = text ? `${matches.length} node(s) with “${text}”` : "";
    if (document.activeElement !== search) search.value = text || "";
  }

  // -- details panel ---------------------------------------------------------------------
  function schemaTable(schema) {
    const table = h("table", "tp-schema");
    for (const [col, type] of schema || []) {
      const tr = h("tr");
      tr.append(h("td", "tp-col", col), h("td", "tp-type", type));
      table.append(tr);
    }
    return table;
  }

  function nodeLink(id, text) {
    if (!id) return h("span", "", text);
    const a = h("a", "tp-link", text);
    a.href = "#";
    a.addEventListener("click", (ev) => {
      ev.preventDefault();
      setTrait("selected", id);
    });
    return a;
  }

  function field(label, value) {
    const row = h("div", "tp-field");
    row.append(h("span", "tp-key", label));
    if (value instanceof Node) row.append(value);
    else row.append(h("span", "tp-val", value));
    return row;
  }

  function showDetails() {
    const d = model.get("details") || {};
    detailsBox.replaceChildren();
    if (!d.type) {
      detailsBox.append(
        h("div", "tp-hint", "Click an operation for its expression and schemas, a dataset for its records."),
      );
      return;
    }
    if (d.type === "stage") {
      // a rolled-up chain of row-preserving steps: its steps, and a way to draw them
      detailsBox.append(h("h4", "", d.label));
      const expand = h("button", "tp-btn tp-expand", "expand into its steps");
      expand.addEventListener("click", () => send({ type: "expand", node: d.node }));
      detailsBox.append(expand);
      detailsBox.append(
        field("rows", `${(d.rows_in || []).map(fmtCount).join(" + ")} → ${fmtCount(d.rows_out)}`),
      );
      detailsBox.append(field("time", `${Number(d.seconds || 0).toFixed(3)} s`));
      const steps = h("ol", "tp-steps");
      for (const s of d.steps || []) {
        const li = h("li");
        li.append(h("b", "", s.method), " ", h("span", "tp-muted", s.expression));
        steps.append(li);
      }
      detailsBox.append(steps);
      (d.inputs || []).forEach((inp, k) => {
        detailsBox.append(field(`input ${k + 1}`, nodeLink(inp.node, inp.label)));
      });
      if (d.output) detailsBox.append(field("output", nodeLink(d.output.node, d.output.label)));
      for (const w of d.warnings || []) detailsBox.append(h("div", "tp-warn", w));
      return;
    }
    if (d.type === "operation") {
      detailsBox.append(h("h4", "", `${d.method} (${d.category})`));
      detailsBox.append(h("pre", "tp-expr", d.expression || d.method));
      const flags = [];
      if (d.opaque) flags.push("opaque: record lineage stops here");
      if (d.contextual) flags.push("contextual: outputs depend on other records");
      if (d.nondeterministic) flags.push("non-deterministic");
      if (flags.length) detailsBox.append(field("flags", flags.join("; ")));
      detailsBox.append(
        field("rows", `${(d.rows_in || []).map(fmtCount).join(" + ")} → ${fmtCount(d.rows_out)}`),
      );
      detailsBox.append(field("time", `${Number(d.seconds || 0).toFixed(3)} s`));
      detailsBox.append(field("tensor entries", fmtCount(d.entries)));
      (d.inputs || []).forEach((inp, k) => {
        detailsBox.append(field(`input ${k + 1}`, nodeLink(inp.node, inp.label)));
        detailsBox.append(schemaTable(inp.schema));
      });
      if (d.output) {
        detailsBox.append(field("output", nodeLink(d.output.node, d.output.label)));
        detailsBox.append(schemaTable(d.output.schema));
      }
      for (const w of d.warnings || []) detailsBox.append(h("div", "tp-warn", w));
      return;
    }
    detailsBox.append(h("h4", "", `${d.label} (${d.kind})`));
    detailsBox.append(field("rows", fmtCount(d.rows)));
    detailsBox.append(
      field("records", d.materialized ? `kept (${d.materialized})` : d.droppable ? "read from the source" : "recomputed on demand"),
    );
    if (d.origin) detailsBox.append(field("origin", d.origin));
    if (d.produced_by) {
      detailsBox.append(field("produced by", nodeLink(d.produced_by.node, d.produced_by.expression || d.produced_by.method)));
    }
    for (const c of d.consumed_by || []) {
      detailsBox.append(field("read by", nodeLink(c.node, c.expression || c.method)));
    }
    if (d.aliases && d.aliases.length) detailsBox.append(field("also", d.aliases.join(", ")));
    detailsBox.append(schemaTable(d.schema));
  }

  // -- records table ---------------------------------------------------------------------
  function droppedCount() {
    return Object.values(model.get("dropped") || {}).reduce((n, rows) => n + rows.length, 0);
  }

  // What-if edits. A double-click on a value of a source's record opens an edit box in its
  // cell (Enter commits, Escape cancels, leaving the box commits). The records table is
  // rebuilt on every reply from Python — the lineage of the double-click's first click
  // arrives while the user types — so the box lives in `editing` and is drawn again,
  // with its text, caret and focus, by each rebuild.
  let editing = null; // {node, row, column, initial, text, start, end}
  let editor = null; // its <input> while drawn; a stale one's blur is ignored
  // committed edits Python has not confirmed yet, "node\0row\0column" -> text: shown
  // (and counted) until `edited` or `error` changes
  let pending = new Map();

  /** The edited value of a cell as {value} (JSON rows are strings), or null. */
  function editedValue(node, row, column) {
    const cols = ((model.get("edited") || {})[node] || {})[String(row)];
    return cols && Object.prototype.hasOwnProperty.call(cols, column) ? { value: cols[column] } : null;
  }

  function editCount() {
    let n = 0;
    for (const rows of Object.values(model.get("edited") || {})) {
      for (const cols of Object.values(rows)) n += Object.keys(cols).length;
    }
    // committed or being typed, not yet in `edited`: counted, so the button is ready
    const keys = new Set(pending.keys());
    if (editing && editing.text !== editing.initial) keys.add(`${editing.node}\0${editing.row}\0${editing.column}`);
    for (const key of keys) {
      const [node, row, column] = key.split("\0");
      if (!editedValue(node, row, column)) n += 1;
    }
    return n;
  }

  // one button, kept across rebuilds: a press that ends an edit (the box's blur commits
  // it and rebuilds the table) still lands on it
  const previewBtn = h("button", "tp-btn tp-preview");
  previewBtn.title = "what-if: which downstream records disappear, change or appear without the ticked records and with the edited values";
  previewBtn.addEventListener("click", () => send({ type: "what_if" }));

  function updatePreview() {
    const parts = [];
    const drops = droppedCount();
    const edits = editCount();
    if (drops) parts.push(plural(drops, "drop"));
    if (edits) parts.push(plural(edits, "edit"));
    previewBtn.textContent = parts.length ? `preview ${parts.join(", ")}` : "preview";
    previewBtn.disabled = !parts.length;
    return drops + edits;
  }

  function startEdit(node, row, column, text) {
    editing = { node, row, column, initial: text, text, start: 0, end: text.length };
    showRecords();
  }

  function commitEdit() {
    const e = editing;
    editing = null;
    editor = null;
    if (e && e.text !== e.initial) {
      pending.set(`${e.node}\0${e.row}\0${e.column}`, e.text);
      send({ type: "edit", node: e.node, row: e.row, column: e.column, value: e.text });
    }
    showRecords();
  }

  function cancelEdit() {
    editing = null;
    editor = null;
    showRecords();
  }

  /** The edit box of the cell being edited (a rebuild draws it again). */
  function editBox(type) {
    const input = h("input", "tp-edit-input");
    input.type = "text";
    input.value = editing.text;
    input.placeholder = "null";
    input.setAttribute("aria-label", `new ${editing.column} of record ${editing.row}`);
    input.title = `${type || ""} value; Enter: mark the edit, Escape: cancel, empty: null`.trim();
    input.dataset.lmSuppressShortcuts = "true"; // notebook shortcuts stay out of the box
    const remember = () => {
      if (!editing || editor !== input) return;
      editing.text = input.value;
      editing.start = input.selectionStart;
      editing.end = input.selectionEnd;
    };
    input.addEventListener("input", () => {
      remember();
      updatePreview();
    });
    input.addEventListener("keyup", remember);
    input.addEventListener("select", remember);
    input.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter") {
        ev.preventDefault();
        ev.stopPropagation();
        remember();
        commitEdit();
      } else if (ev.key === "Escape") {
        ev.preventDefault();
        ev.stopPropagation();
        cancelEdit();
      }
    });
    input.addEventListener("blur", () => {
      if (editor === input) {
        remember();
        commitEdit();
      }
    });
    // clicks in the box move the caret: neither a cell lineage nor another edit
    for (const name of ["click", "dblclick", "mousedown"]) {
      input.addEventListener(name, (ev) => ev.stopPropagation());
    }
    return input;
  }

  /** The lineage entry of a dataset (by id: a hidden dataset has no node on show). */
  function lineageEntry(lin, dsId) {
    return (lin.datasets || []).find((d) => d.id === dsId);
  }

  function showRecords() {
    const r = model.get("records") || {};
    editor = null; // the box about to be removed: its blur is not a commit
    recordsBox.replaceChildren();
    if (editing && editing.node !== r.node) editing = null;
    if (!r.node) return;
    const head = h("div", "tp-records-head");
    const what = r.lineage_only ? "lineage records of" : "records of";
    head.append(h("b", "", `${what} ${r.label}`));
    if (r.recomputed) {
      const badge = h("span", "tp-badge tp-recomputed", "recomputed");
      badge.title = "not materialized: these records were recomputed by replaying the operations on their provenance-related input records";
      head.append(badge);
    } else if (r.materialized) {
      const badge = h("span", "tp-badge tp-kept", "materialized");
      badge.title = `kept whole: ${r.materialized}`;
      head.append(badge);
    }
    const hint = r.droppable
      ? "click a row number for its record's lineage, a value for its cell's; tick records to drop, double-click a value to edit it"
      : "click a row number for its record's lineage, a value for its cell's";
    head.append(h("span", "tp-muted", ` — ${fmtCount(r.total)} rows; ${hint}`));
    const marked = updatePreview();
    if (r.droppable || marked) head.append(previewBtn);
    const prev = h("button", "tp-btn", "‹ prev");
    const next = h("button", "tp-btn", "next ›");
    prev.disabled = r.page <= 0;
    next.disabled = r.page >= r.pages - 1;
    prev.addEventListener("click", () => send({ type: "page", page: r.page - 1 }));
    next.addEventListener("click", () => send({ type: "page", page: r.page + 1 }));
    const pager = h("span", "tp-pager");
    pager.append(prev, h("span", "", ` page ${r.page + 1} of ${r.pages} `), next);
    head.append(pager);
    recordsBox.append(head);
    if (r.error) {
      recordsBox.append(h("div", "tp-warn", r.error));
      return;
    }
    const lin = model.get("lineage") || {};
    const here = lin.origin && lin.origin.node === r.node;
    const picked = here ? lin.origin.row : null;
    const pickedCol = here ? lin.origin.column : undefined;
    const entry = lineageEntry(lin, r.dataset);
    const reached = new Set(entry ? entry.rows : []);
    // cells of the picked cell's lineage on this page: "row\0column" -> classes
    const marks = r.marks || {};
    const cellClass = new Map();
    for (const [kind, cls] of [["contributing", "tp-c"], ["influencing", "tp-i"]]) {
      for (const [col, rows] of Object.entries(marks[kind] || {})) {
        for (const x of rows) {
          const key = `${x}\0${col}`;
          cellClass.set(key, `${cellClass.get(key) || ""} ${cls}`.trim());
        }
      }
    }
    const colKind = {};
    for (const kind of ["contributing", "influencing"]) {
      for (const c of (entry && entry[kind]) || []) colKind[c.column] = `${colKind[c.column] || ""} tp-${kind[0]}`.trim();
    }
    const dropped = new Set((model.get("dropped") || {})[r.node] || []);
    const wrap = h("div", "tp-table-wrap");
    const table = h("table", "tp-table");
    const thead = h("thead");
    const htr = h("tr");
    if (r.droppable) {
      const th = h("th", "tp-drop", "drop");
      th.title = "tick records to drop in a what-if preview";
      htr.append(th);
    }
    for (const c of r.columns || []) htr.append(h("th", colKind[c] || "", c));
    thead.append(htr);
    const tbody = h("tbody");
    const cols = r.columns || [];
    const types = r.types || [];
    let box = null;
    for (const row of r.rows || []) {
      const tr = h("tr", "tp-row");
      const idx = row[0];
      if (idx === picked) tr.classList.add("tp-picked");
      else if (reached.has(idx)) tr.classList.add("tp-reached");
      if (dropped.has(idx)) tr.classList.add("tp-dropped");
      if (r.droppable) {
        const td = h("td", "tp-drop");
        const check = h("input");
        check.type = "checkbox";
        check.checked = dropped.has(idx);
        check.title = `drop record ${idx} in the what-if preview`;
        check.addEventListener("change", () => send({ type: "drop", node: r.node, row: idx, on: check.checked }));
        td.append(check);
        tr.append(td);
      }
      row.forEach((v, j) => {
        const col = cols[j];
        const td = h("td", v === null ? "tp-null" : "", fmtCell(v));
        if (j === 0) {
          // the row number: the whole record's lineage
          td.classList.add("tp-rowhead");
          td.title = "lineage of this record";
          td.addEventListener("click", () => {
            clickedAt = performance.now();
            send({ type: "record", row: idx, node: r.node });
          });
        } else {
          const cls = cellClass.get(`${idx}\0${col}`);
          if (cls) td.className = `${td.className} ${cls}`.trim();
          if (idx === picked && col === pickedCol) td.classList.add("tp-cell-picked");
          td.title = `lineage of ${col} in record ${idx}`;
          // the second click of a double-click is no new lineage query: the first one's
          // lineage is on its way
          td.addEventListener("click", (ev) => {
            if (ev.detail > 1) return;
            clickedAt = performance.now();
            send({ type: "cell", row: idx, column: col, node: r.node });
          });
          if (r.droppable) {
            const key = `${r.node}\0${idx}\0${col}`;
            const marked = editedValue(r.node, idx, col);
            const shown = pending.has(key) ? { value: pending.get(key) } : marked;
            if (shown) {
              // the new value on show, the old one in the tooltip
              td.textContent = fmtCell(shown.value);
              td.classList.toggle("tp-null", shown.value === null);
              td.classList.add(pending.has(key) ? "tp-edit-pending" : "tp-edited");
              td.dataset.old = fmtCell(v);
              td.title = `edited: was ${fmtCell(v)} — click for the lineage of ${col} in record ${idx}, double-click to change it (type ${editText(v) || "nothing"} to undo)`;
            } else {
              td.title += "; double-click to edit the value for a what-if preview";
            }
            td.addEventListener("dblclick", (ev) => {
              ev.preventDefault();
              window.getSelection()?.removeAllRanges(); // the double-click selected a word
              startEdit(r.node, idx, col, editText(shown ? shown.value : v));
            });
            if (editing && editing.row === idx && editing.column === col) {
              box = editBox(types[j]);
              td.replaceChildren(box);
              td.classList.add("tp-editing");
              editor = box;
            }
          }
        }
        tr.append(td);
      });
      tbody.append(tr);
    }
    table.append(thead, tbody);
    wrap.append(table);
    recordsBox.append(wrap);
    if (editing && !box) editing = null; // its record is not on this page any more
    if (box) {
      box.focus({ preventScroll: true });
      box.setSelectionRange(editing.start, editing.end);
    }
  }

  // -- default view ----------------------------------------------------------------------
  // Labels are drawn at their font size (11 px nodes, 10 px edges) times the zoom. The
  // first view fits the graph, but never below LEGIBLE_ZOOM: a graph too wide (or tall)
  // for the canvas at that zoom is shown from its sources (left), centred where it fits,
  // and pans, the overview showing where the view is. "Fit" shows all of it at any size.
  const LEGIBLE_ZOOM = 1.0;
  const MAX_FIRST_ZOOM = 1.5; // a small graph is not blown up past this
  const MARGIN = 24;
  function fitLegibly() {
    const eles = cy.elements();
    if (eles.empty() || !cy.width() || !cy.height()) return;
    cy.fit(undefined, MARGIN);
    const fitted = cy.zoom();
    if (fitted >= LEGIBLE_ZOOM && fitted <= MAX_FIRST_ZOOM) return;
    const zoom = Math.min(Math.max(fitted, LEGIBLE_ZOOM), MAX_FIRST_ZOOM);
    const bb = eles.boundingBox();
    const W = cy.width(), H = cy.height();
    const place = (lo, size, room) =>
      size * zoom + 2 * MARGIN <= room ? (room - size * zoom) / 2 - lo * zoom : MARGIN - lo * zoom;
    cy.viewport({ zoom, pan: { x: place(bb.x1, bb.w, W), y: place(bb.y1, bb.h, H) } });
  }

  // -- overview (minimap) -----------------------------------------------------------------
  const OVERVIEW_MIN_NODES = 10;
  let overviewFit = null;
  function drawOverview() {
    const nodes = cy.nodes();
    const seen = cy.extent(), all = nodes.boundingBox();
    const overflows =
      !nodes.empty() && (all.x1 < seen.x1 || all.x2 > seen.x2 || all.y1 < seen.y1 || all.y2 > seen.y2);
    if (nodes.length <= OVERVIEW_MIN_NODES && !overflows) {
      overview.style.display = "none";
      overviewFit = null;
      return;
    }
    overview.style.display = "block";
    const bb = nodes.boundingBox();
    const W = overview.width, H = overview.height, pad = 4;
    const s = Math.min((W - 2 * pad) / Math.max(bb.w, 1), (H - 2 * pad) / Math.max(bb.h, 1));
    const ox = pad + (W - 2 * pad - bb.w * s) / 2 - bb.x1 * s;
    const oy = pad + (H - 2 * pad - bb.h * s) / 2 - bb.y1 * s;
    const ctx = overview.getContext("2d");
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, W, H);
    nodes.forEach((n) => {
      const p = n.position();
      const w = Math.max(n.data("w") * s, 1.5), hh = Math.max(n.data("h") * s, 1.5);
      ctx.fillStyle = n.hasClass("lin-stopped") ? "#f59e0b"
        : n.hasClass("lin-origin") ? "#7c3aed"
        : n.hasClass("lin-backward") ? "#dc2626"
        : n.hasClass("lin-forward") ? "#16a34a"
        : n.data("border") || "#64748b";
      ctx.fillRect(ox + p.x * s - w / 2, oy + p.y * s - hh / 2, w, hh);
    });
    const ext = cy.extent();
    ctx.strokeStyle = "#2563eb";
    ctx.lineWidth = 1.5;
    ctx.strokeRect(ox + ext.x1 * s, oy + ext.y1 * s, ext.w * s, ext.h * s);
    overviewFit = { s, ox, oy };
  }
  overview.addEventListener("click", (ev) => {
    if (!overviewFit) return;
    const r = overview.getBoundingClientRect();
    const mx = ((ev.clientX - r.left) * overview.width) / r.width;
    const my = ((ev.clientY - r.top) * overview.height) / r.height;
    const x = (mx - overviewFit.ox) / overviewFit.s, y = (my - overviewFit.oy) / overviewFit.s;
    const z = cy.zoom();
    cy.pan({ x: cy.width() / 2 - x * z, y: cy.height() / 2 - y * z });
  });
  cy.on("viewport", () => drawOverview());

  // -- legend ----------------------------------------------------------------------------
  const MARKS = [
    ["backward lineage", "#dc2626"],
    ["forward lineage", "#16a34a"],
    ["picked record", "#7c3aed"],
    ["where a record stopped", "#f59e0b"],
  ];
  function showLegend(entries) {
    legendItems.replaceChildren();
    for (const e of entries) {
      const s = e.style;
      const sw = h("span", "tp-swatch");
      sw.style.background = s.fill;
      sw.style.border = `${Math.min(s.border_width, 3)}px ${s.border_style} ${s.border}`;
      if (s.shape === "round-rectangle") sw.style.borderRadius = "5px";
      const item = h("span", "tp-legend-item");
      item.append(sw, e.label);
      legendItems.append(item);
    }
    for (const [text, colour] of MARKS) {
      const sw = h("span", "tp-swatch tp-swatch-mark");
      sw.style.background = colour;
      const item = h("span", "tp-legend-item");
      item.append(sw, text);
      legendItems.append(item);
    }
  }

  // -- lineage ---------------------------------------------------------------------------
  function showLineage() {
    const lin = model.get("lineage") || {};
    const counts = lin.counts || {};
    const dir = lin.direction || {};
    const active = !!lin.origin;
    cy.batch(() => {
      cy.elements().removeClass("lin lin-backward lin-forward lin-origin lin-stopped dim");
      const stopped = new Set((lin.why_not || []).map((w) => w.node).filter((n) => n));
      cy.nodes().forEach((n) => {
        const c = counts[n.id()];
        if (stopped.has(n.id())) n.addClass("lin-stopped");
        else if (c !== undefined) n.addClass(`lin-${dir[n.id()]}`);
        else if (active) n.addClass("dim");
      });
      const onPath = new Set(lin.edges || []);
      cy.edges().forEach((e) => {
        if (onPath.has(e.id())) e.addClass("lin");
        else if (active) e.addClass("dim");
      });
    });
    drawOverview();
    relabel();
    if (clickedAt !== null) {
      const t0 = clickedAt;
      clickedAt = null;
      cy.one("render", () => {
        el.dataset.highlightMs = (performance.now() - t0).toFixed(1);
        el.dataset.highlightSeq = String(++highlights);
      });
    }
    lineageBox.replaceChildren();
    if (lin.error) {
      lineageBox.append(h("div", "tp-warn", lin.error));
      return;
    }
    if (!active) return;
    const cells = lin.mode === "cell";
    const head = h("div", "tp-lineage-head");
    const of = cells ? `${lin.origin.label}.${lin.origin.column} row ${lin.origin.row}` : `${lin.origin.label} row ${lin.origin.row}`;
    head.append(h("b", "", `lineage of ${of}`));
    const clear = h("button", "tp-btn", "clear");
    clear.addEventListener("click", () => send({ type: "clear" }));
    head.append(clear);
    lineageBox.append(head);
    if (cells) {
      const key = h("div", "tp-muted tp-key-line");
      key.append(h("span", "tp-c", "contributing"), " values flow; ", h("span", "tp-i", "influencing"), " conditions, keys");
      lineageBox.append(key);
    }
    const list = h("ul", "tp-lineage-list");
    for (const d of lin.datasets || []) {
      const li = h("li", `tp-dir-${d.direction}`);
      li.dataset.dataset = String(d.id);
      const arrow = { backward: "↑", forward: "↓", origin: "●" }[d.direction] || "";
      const name = h("a", "tp-link", `${arrow} ${d.label}`);
      name.href = "#";
      name.title = "show these records";
      name.addEventListener("click", (ev) => {
        ev.preventDefault();
        send({ type: "lineage_rows", node: `d${d.id}` });
      });
      const rows = `[${d.rows.join(", ")}${d.truncated ? ", …" : ""}]`;
      li.append(name, h("span", "tp-muted", cells ? `: ${fmtCount(d.count)} row(s), ${fmtCount(d.cells)} cell(s)` : `: ${fmtCount(d.count)} row(s) ${rows}`));
      if (cells) {
        const sub = h("ul", "tp-cols");
        for (const kind of ["contributing", "influencing"]) {
          for (const c of d[kind] || []) {
            const item = h("li", `tp-col-${kind}`);
            item.append(
              h("span", `tp-${kind[0]}`, c.column),
              h("span", "tp-muted", ` ${kind}: ${fmtCount(c.count)} row(s) [${c.rows.join(", ")}${c.truncated ? ", …" : ""}]`),
            );
            sub.append(item);
          }
        }
        li.append(sub);
      }
      list.append(li);
    }
    lineageBox.append(list);
    for (const b of lin.blocked || []) {
      lineageBox.append(h("div", "tp-warn", `record lineage stops at opaque ${b.method}: ${b.expression}`));
    }
    for (const b of lin.approximate || []) {
      lineageBox.append(h("div", "tp-warn", `column lineage through ${b.method} is a superset (attribute map not exact): ${b.expression}`));
    }
    // a source record: where it did not go (why-not), and the values that decided it
    const gone = lin.why_not || [];
    if (gone.length) {
      const box = h("div", "tp-whynot");
      box.append(h("div", "tp-wi-title", "where it stopped"));
      for (const w of gone) {
        const line = h("div", `tp-whynot-item tp-whynot-${w.status}`);
        const vals = Object.entries(w.values || {})
          .map(([c, v]) => `${c} = ${v.map((x) => (x === null ? "null" : x)).join(", ")}`)
          .join("; ");
        line.append(h("b", "", w.sink ? `not in ${w.sink}: ` : ""), h("span", "", w.reason));
        if (vals) line.append(h("span", "tp-muted", ` (${vals})`));
        if (w.node) {
          line.dataset.node = w.node;
          line.title = w.expression;
          line.classList.add("tp-link");
          line.addEventListener("click", () => setTrait("selected", w.node));
        }
        box.append(line);
      }
      lineageBox.append(box);
    }
    showRecords(); // re-mark picked / reached rows
  }

  // -- what-if ---------------------------------------------------------------------------
  function whatIfTable(t, title, cls) {
    const box = h("div", `tp-wi-part ${cls}`);
    box.append(h("div", "tp-wi-title", `${title}: ${fmtCount(t.total)}${t.truncated ? ` (first ${t.rows.length} shown)` : ""}`));
    const table = h("table", "tp-table");
    const thead = h("thead");
    const htr = h("tr");
    for (const c of t.columns) htr.append(h("th", "", c));
    thead.append(htr);
    const tbody = h("tbody");
    t.rows.forEach((row, i) => {
      const tr = h("tr");
      const before = (t.before || [])[i] || {};
      row.forEach((v, j) => {
        const col = t.columns[j];
        if (col in before) {
          // a changed value: old → new
          const td = h("td", "tp-wi-changed", `${fmtCell(before[col])} → ${fmtCell(v)}`);
          td.title = `${col}: was ${fmtCell(before[col])}`;
          tr.append(td);
        } else tr.append(h("td", v === null ? "tp-null" : "", fmtCell(v)));
      });
      tbody.append(tr);
    });
    table.append(thead, tbody);
    const wrap = h("div", "tp-table-wrap");
    wrap.append(table);
    box.append(wrap);
    return box;
  }

  function showWhatIf() {
    const wi = model.get("what_if") || {};
    const status = wi.nodes || {};
    const active = !!wi.datasets;
    cy.batch(() => {
      cy.elements().removeClass("wi-dropped wi-edited wi-changed wi-not_previewable wi-same wi-dim");
      if (active) {
        cy.nodes().forEach((n) => {
          const s = status[n.id()];
          n.addClass(s ? `wi-${s}` : "wi-dim");
        });
        cy.edges().forEach((e) => {
          if (!(status[e.source().id()] && status[e.target().id()])) e.addClass("wi-dim");
        });
      }
    });
    relabel();
    whatIfBox.replaceChildren();
    if (wi.error) {
      whatIfBox.append(h("div", "tp-warn", wi.error));
      return;
    }
    if (!active) return;
    const head = h("div", "tp-lineage-head");
    const what = [];
    if ((wi.drop || []).length) {
      what.push(`without ${wi.drop.map((d) => `${d.label} row(s) [${d.rows.join(", ")}]`).join(", ")}`);
    }
    if ((wi.edit || []).length) {
      what.push(`with ${wi.edit.map((e) => `${e.label} row ${e.row} ${e.column} ${fmtCell(e.old)} → ${fmtCell(e.new)}`).join(", ")}`);
    }
    head.append(h("b", "", `what-if: ${what.join("; ")}`));
    const clear = h("button", "tp-btn", "clear");
    clear.addEventListener("click", () => send({ type: "clear_what_if" }));
    head.append(clear);
    whatIfBox.append(head);
    if (!(wi.datasets || []).length) whatIfBox.append(h("div", "tp-muted", "no downstream record is reached"));
    for (const d of wi.datasets || []) {
      const sec = h("div", `tp-wi-ds tp-wi-${d.status}`);
      sec.dataset.dataset = String(d.id);
      const n = d.counts || {};
      const title = h("div", "tp-wi-head");
      title.append(nodeLink(d.node, d.label));
      const text = {
        changed: ` — ${fmtCount(n.removed)} removed, ${fmtCount(n.changed)} changed, ${fmtCount(n.added)} added`,
        same: " — unchanged",
        not_previewable: " — not previewable",
      }[d.status];
      title.append(h("span", "tp-muted", text));
      sec.append(title);
      if (d.status === "not_previewable") sec.append(h("div", "tp-warn", d.reason));
      if (n.removed) sec.append(whatIfTable(d.removed, "removed", "tp-wi-removed"));
      if (n.changed) sec.append(whatIfTable(d.changed, "changed (old → new)", "tp-wi-changed-part"));
      if (n.added) sec.append(whatIfTable(d.added, "added", "tp-wi-added"));
      whatIfBox.append(sec);
    }
  }

  function showError() {
    const e = model.get("error");
    errorBar.textContent = e || "";
    errorBar.style.display = e ? "block" : "none";
  }

  // -- user input ------------------------------------------------------------------------
  cy.on("tap", "node", (ev) => setTrait("selected", ev.target.id()));
  cy.on("tap", (ev) => {
    if (ev.target === cy) setTrait("selected", "");
  });
  coarseBox.addEventListener("change", () => setTrait("coarse", coarseBox.checked));
  rollupBox.addEventListener("change", () => setTrait("rollup", rollupBox.checked));
  focusBtn.addEventListener("click", () => {
    const sel = model.get("selected");
    if (sel) setTrait("focus", sel);
  });
  unfocusBtn.addEventListener("click", () => setTrait("focus", ""));
  fitBtn.addEventListener("click", () => cy.fit(undefined, 24)); // the whole graph, any size
  search.addEventListener("input", () => setTrait("search", search.value));

  const handlers = {
    "change:graph": drawGraph,
    "change:selected": showSelected,
    "change:matches": showMatches,
    "change:search": showMatches,
    "change:details": showDetails,
    "change:records": showRecords,
    "change:lineage": showLineage,
    "change:what_if": showWhatIf,
    "change:dropped": showRecords,
    "change:edited": () => {
      pending = new Map(); // Python has answered the edits sent so far
      showRecords();
    },
    "change:error": () => {
      showError();
      if (model.get("error") && pending.size) {
        pending = new Map(); // a refused edit: the cell shows its value again
        showRecords();
      }
    },
    "change:coarse": () => (coarseBox.checked = !!model.get("coarse")),
    "change:rollup": () => (rollupBox.checked = !!model.get("rollup")),
  };
  for (const [name, fn] of Object.entries(handlers)) model.on(name, fn);

  drawGraph();
  showDetails();
  showRecords();
  showError();
  // the container may get its size after the first draw (output area animation, a bar
  // above the graph): fit the graph again until the user pans or zooms it
  let moved = false;
  for (const ev of ["mousedown", "wheel", "touchstart"]) {
    canvas.addEventListener(ev, () => (moved = true), { passive: true });
  }
  const resize = new ResizeObserver(() => {
    cy.resize();
    if (!moved) fitLegibly();
  });
  resize.observe(canvas);

  return () => {
    for (const [name, fn] of Object.entries(handlers)) model.off(name, fn);
    resize.disconnect();
    delete el.__tensprov_cy;
    cy.destroy();
  };
}

export default { render };
