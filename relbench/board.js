// relbench's interactive board: draws the JSON a page embeds (#board-data) with text
// nodes only, never markup. Each name in data.views is drawn by VIEWS[name]; a new
// view adds its data in relbench/board.py and its function here.
"use strict";

(function () {
  const data = JSON.parse(document.getElementById("board-data").textContent);
  const root = document.getElementById("board");
  const state = { filters: {}, sort: null, descending: false };
  const redraws = [];

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
    redraws.push(() => {
      const rows = visibleRows();
      body.replaceChildren(...rows.map((row) => {
        const tr = element("tr");
        tr.append(...data.columns.map((column) => cell(row, column)));
        return tr;
      }));
      count.textContent = rows.length + " of " + data.rows.length + " cells";
      for (const th of head.children) {
        const sorted = th.dataset.column === state.sort;
        th.setAttribute("aria-sort", sorted ? (state.descending ? "descending" : "ascending") : "none");
      }
    });
  }

  function combination(entry) {
    return data.methods.map((column) => entry[column]).filter((v) => v !== null && v !== undefined).join(" · ");
  }

  function matrix() {
    if (!data.matrix.length || data.axes.length !== 2) return;
    const [rowAxis, columnAxis] = data.axes;
    const section = element("section", { id: "matrix" });
    section.append(element("h2", {}, rowAxis + " × " + columnAxis));
    const select = element("select", { "data-matrix": "combination" });
    const labels = [...new Set(data.matrix.map((entry) => combination(entry) + " | " + entry.metric))];
    for (const label of labels) select.append(element("option", { value: label }, label));
    const grid = element("table", { class: "matrix" });
    section.append(select, grid);
    root.append(section);
    function draw() {
      const cells = data.matrix.filter((entry) => combination(entry) + " | " + entry.metric === select.value);
      const rows = [...new Set(cells.map((entry) => entry[rowAxis]))];
      const columns = [...new Set(cells.map((entry) => entry[columnAxis]))];
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

  function redraw() { for (const draw of redraws) draw(); }

  const VIEWS = { filters, table, matrix };
  for (const view of data.views) if (VIEWS[view]) VIEWS[view]();
  redraw();
})();
