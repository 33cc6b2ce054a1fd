// relbench's interactive board: draws the JSON a page embeds (#board-data) with text
// nodes only, never markup. Each name in data.views is drawn by VIEWS[name]; a new
// view adds its data in relbench/board.py and its function here.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("board-data").textContent);
  const root = document.getElementById("board");
  const state = { filters: {}, sort: null, descending: false };
  const redraws = [];
  const PAGE = 500;  // table rows drawn at a time

  function element(tag, attributes, text) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // how a value is shown: numbers with three decimals (whole numbers as they are), booleans as yes/no
  function shown(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (typeof value === "number") return Number.isInteger(value) ? String(value) : value.toFixed(3);
    return String(value);
  }

  function visibleRows() {
    const rows = data.rows.filter((row) => Object.entries(state.filters).every(
      ([column, wanted]) => wanted === "" || JSON.stringify(row[column] ?? null) === wanted));
    if (state.sort === null) return rows;
    const column = state.sort, numeric = data.numeric.includes(column), sign = state.descending ? -1 : 1;
    return rows.slice().sort((a, b) => {
      const x = a[column] ?? null, y = b[column] ?? null;
      if (x === null || y === null) return (x === null) - (y === null);  // missing values last
      return sign * (numeric ? x - y : String(x).localeCompare(String(y)));
    });
  }

  function filters() {
    const bar = element("form", { id: "filters" });
    for (const column of data.filters) {
      const values = [...new Set(data.rows.map((row) => JSON.stringify(row[column] ?? null)))];
      if (values.length < 2) continue;  // nothing to choose
      const select = element("select", { name: column, "data-filter": column });
      select.append(element("option", { value: "" }, "all"));
      for (const value of values.sort()) {
        select.append(element("option", { value: value }, shown(JSON.parse(value)) || "(none)"));
      }
      select.addEventListener("change", () => { state.filters[column] = select.value; redraw(); });
      const label = element("label", {}, column + " ");
      label.append(select);
      bar.append(label);
    }
    root.append(bar);
  }

  function cell(row, column) {
    const td = element("td", { "data-column": column, "data-value": JSON.stringify(row[column] ?? null) });
    if (column === "task" && data.pages[row.task]) {
      td.append(element("a", { href: encodeURIComponent(row.task) + ".html" }, row.task));
    } else {
      td.textContent = shown(row[column]);
    }
    return td;
  }

  function table() {
    const count = element("p", { id: "count" });
    const grid = element("table", { id: "cells" });
    const head = element("tr");
    for (const column of data.columns) {
      const th = element("th", { "data-column": column, tabindex: "0", "aria-sort": "none" }, column);
      th.addEventListener("click", () => {
        state.descending = state.sort === column ? !state.descending : false;
        state.sort = column;
        redraw();
      });
      head.append(th);
    }
    grid.appendChild(element("thead")).append(head);
    const body = grid.appendChild(element("tbody"));
    root.append(count, grid);
    // rows are drawn a page at a time (a release's main table holds about 10,000 cells): the
    // first PAGE of the sorted, filtered rows, and a button that draws the next PAGE
    const more = element("button", { id: "more", type: "button" });
    root.append(more);
    let rows = [], shownRows = 0;
    function drawMore() {
      const next = rows.slice(shownRows, shownRows + PAGE);
      body.append(...next.map((row) => {
        const tr = element("tr");
        tr.append(...data.columns.map((column) => cell(row, column)));
        return tr;
      }));
      shownRows += next.length;
      const left = rows.length - shownRows;
      more.hidden = left <= 0;
      more.textContent = "show " + Math.min(PAGE, left) + " more (" + left + " not shown)";
    }
    more.addEventListener("click", drawMore);
    redraws.push(() => {
      rows = visibleRows();
      shownRows = 0;
      body.replaceChildren();
      drawMore();
      count.textContent = rows.length + " of " + data.rows.length + " cells";
      for (const th of head.children) {
        const sorted = th.dataset.column === state.sort;
        th.setAttribute("aria-sort", sorted ? (state.descending ? "descending" : "ascending") : "none");
      }
    });
  }

  // the name of a cell's series: its values of the given keys (method columns, metric …)
  function seriesOf(entry, labels) {
    const values = labels.map((key) => entry[key]).filter((v) => v !== null && v !== undefined);
    return [...new Set(values)].join(" · ");  // a value named twice (a measure and its metric) once
  }

  // one matrix section: a select of its series, the rows × columns table of the chosen one
  function drawMatrix(id, heading, matrix, link) {
    if (!matrix.cells.length || matrix.axes.length !== 2) return;
    const [rowAxis, columnAxis] = matrix.axes;
    const section = element("section", { id: id, class: "matrix-view" });
    const title = section.appendChild(element("h2", {}, heading + rowAxis + " × " + columnAxis));
    if (link) title.prepend(element("a", { href: link }, matrix.task), ": ");
    const select = element("select", { "data-matrix": "combination" });
    const labels = [...new Set(matrix.cells.map((entry) => seriesOf(entry, matrix.labels)))];
    for (const label of labels) select.append(element("option", { value: label }, label));
    const grid = element("table", { class: "matrix" });
    section.append(select, grid);
    root.append(section);
    function draw() {
      const cells = matrix.cells.filter((entry) => seriesOf(entry, matrix.labels) === select.value);
      // rows and columns in one order (first seen as a row or a column), so the diagonal is the diagonal
      const order = [...new Set(cells.flatMap((entry) => [entry[rowAxis], entry[columnAxis]]))];
      const rows = order.filter((value) => cells.some((entry) => entry[rowAxis] === value));
      const columns = order.filter((value) => cells.some((entry) => entry[columnAxis] === value));
      const scores = cells.map((entry) => entry.score);
      const low = Math.min(...scores), span = Math.max(...scores) - low || 1;
      const head = element("tr");
      head.append(element("th", {}, rowAxis + " \\ " + columnAxis), ...columns.map((c) => element("th", {}, c)));
      const body = rows.map((r) => {
        const tr = element("tr");
        tr.append(element("th", {}, r));
        for (const c of columns) {
          const entry = cells.find((e) => e[rowAxis] === r && e[columnAxis] === c);
          if (!entry) {
            tr.append(element("td", { class: "missing", title: r + " → " + c + ": no score" }, "n/a"));
            continue;
          }
          const interval = entry.low === null ? "n/a" : "[" + shown(entry.low) + ", " + shown(entry.high) + "]";
          tr.append(element("td", {
            "data-score": JSON.stringify(entry.score), "data-low": JSON.stringify(entry.low),
            "data-high": JSON.stringify(entry.high), "data-n": JSON.stringify(entry.n),
            title: r + " → " + c + ": " + shown(entry.score) + ", 95 % interval " + interval + ", n " + entry.n,
            style: "--shade: " + ((entry.score - low) / span).toFixed(3),
          }, shown(entry.score)));
        }
        return tr;
      });
      grid.replaceChildren(head, ...body);
    }
    select.addEventListener("change", draw);
    draw();
  }

  function matrix() { drawMatrix("matrix", "", data.matrix, null); }

  // the matrices of the tasks this one reads (a similarity task's stitching task), beside its own
  function companions() {
    data.companions.forEach((companion, i) => drawMatrix("companion-" + i, "", companion,
      encodeURIComponent(companion.task) + ".html"));
  }

  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) node.setAttribute(key, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // score over the curve axis (log 2 scale), one line per series of the chosen metric, its
  // 95 % interval as a band; a point at 0 (a reference without anchors) as a dashed level line
  function curves() {
    const curve = data.curves;
    if (!curve.cells.length) return;
    const axis = curve.axis, labels = curve.labels.filter((key) => key !== "metric");
    const section = element("section", { id: "curves" });
    section.append(element("h2", {}, "score over " + axis));
    const select = element("select", { "data-curve": "metric" });
    for (const metric of [...new Set(curve.cells.map((entry) => entry.metric))]) {
      select.append(element("option", { value: metric }, metric));
    }
    const width = 640, height = 360, margin = { left: 56, right: 16, top: 12, bottom: 40 };
    const plot = svg("svg", { width: width, height: height, viewBox: "0 0 " + width + " " + height, role: "img" });
    const legend = element("ul", { class: "legend" });
    section.append(select, plot, legend);
    root.append(section);
    function draw() {
      const cells = curve.cells.filter((entry) => entry.metric === select.value);
      const xs = cells.map((e) => e[axis]).filter((x) => x > 0);
      const ys = cells.flatMap((e) => [e.score, e.low, e.high]).filter((y) => y !== null);
      const x0 = Math.log2(Math.min(...xs)), x1 = Math.log2(Math.max(...xs)) || x0 + 1;
      const y0 = Math.min(...ys), y1 = Math.max(...ys) > y0 ? Math.max(...ys) : y0 + 1;
      const px = (x) => margin.left + (width - margin.left - margin.right) * (Math.log2(x) - x0) / (x1 - x0 || 1);
      const py = (y) => height - margin.bottom - (height - margin.top - margin.bottom) * (y - y0) / (y1 - y0);
      plot.replaceChildren();
      legend.replaceChildren();
      for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
        plot.append(svg("text", { x: px(x), y: height - margin.bottom + 16, "text-anchor": "middle" }, String(x)));
      }
      for (const y of [y0, (y0 + y1) / 2, y1]) {
        plot.append(svg("text", { x: margin.left - 6, y: py(y) + 4, "text-anchor": "end" }, shown(y)));
      }
      plot.append(svg("text", { x: (width + margin.left) / 2, y: height - 6, "text-anchor": "middle" }, axis));
      const series = [...new Set(cells.map((entry) => seriesOf(entry, labels)))];
      series.forEach((name, i) => {
        const colour = "hsl(" + Math.round(360 * i / series.length) + ", 65%, 42%)";
        const points = cells.filter((e) => seriesOf(e, labels) === name).sort((a, b) => a[axis] - b[axis]);
        const group = svg("g", { "data-series": name, stroke: colour, fill: "none" });
        const drawn = points.filter((p) => p[axis] > 0);
        for (const p of points.filter((q) => q[axis] <= 0)) {  // a reference without anchors
          group.append(svg("line", { x1: px(Math.min(...xs)), x2: px(Math.max(...xs)), y1: py(p.score),
            y2: py(p.score), "stroke-dasharray": "5 4", "data-score": JSON.stringify(p.score) }));
        }
        const banded = drawn.filter((p) => p.low !== null && p.high !== null);
        if (banded.length > 1) {
          const upper = banded.map((p) => px(p[axis]) + "," + py(p.high));
          const lower = banded.slice().reverse().map((p) => px(p[axis]) + "," + py(p.low));
          group.append(svg("polygon", { points: [...upper, ...lower].join(" "), fill: colour, "fill-opacity": "0.15",
            stroke: "none" }));
        }
        if (drawn.length) {
          group.append(svg("polyline", { points: drawn.map((p) => px(p[axis]) + "," + py(p.score)).join(" ") }));
        }
        for (const p of drawn) {
          const interval = p.low === null ? "n/a" : "[" + shown(p.low) + ", " + shown(p.high) + "]";
          const dot = svg("circle", { cx: px(p[axis]), cy: py(p.score), r: 3, fill: colour,
            "data-x": JSON.stringify(p[axis]), "data-score": JSON.stringify(p.score) });
          dot.append(svg("title", {}, name + ", " + axis + " " + p[axis] + ": " + shown(p.score) +
            ", 95 % interval " + interval + ", n " + p.n));
          group.append(dot);
        }
        plot.append(group);
        const item = element("li", { style: "color: " + colour }, name);
        legend.append(item);
      });
    }
    select.addEventListener("change", draw);
    draw();
  }

  function redraw() { for (const draw of redraws) draw(); }

  const VIEWS = { filters, table, matrix, companions, curves };
  for (const view of data.views) if (VIEWS[view]) VIEWS[view]();
  redraw();
})();
