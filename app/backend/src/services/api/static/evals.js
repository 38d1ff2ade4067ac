// The eval pages: #/evals lists the latest eval runs (studio eval run), #/evals/ID shows one
// run's matrix (per cell: resolved, pass rate with its 95% Wilson interval, cost per resolved
// task) and its tasks (resolved, failing tests, cost, turns, error code, the execution). Every
// value from the API is put in the page as text.
"use strict";

(() => {
  const percent = (value) => (value * 100).toFixed(1) + "%";
  const dollars = (value) => (value === null || value === undefined ? "-"
    : "$" + Number(value).toFixed(4));

  function table(id, caption, header, rows) {
    const { el } = Studio;
    return el("table", { id },
      el("caption", {}, caption),
      el("thead", {}, el("tr", {}, ...header.map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", {}, ...rows.map((cells) => el("tr", {}, ...cells.map((cell) =>
        el("td", {}, cell))))));
  }

  Studio.renderEvals = async function renderEvals(view) {
    const { el, api, when } = Studio;
    view.replaceChildren(el("h1", {}, "Evals"), el("p", { class: "muted" }, "Loading…"));
    let data;
    try {
      data = await api("/api/evals");
    } catch (error) {
      Studio.problem(view, "Evals", error);
      return;
    }
    const rows = data.runs.map((run) => [
      el("a", { href: "#/evals/" + encodeURIComponent(run.id) }, run.id),
      run.suite, run.status, when(run.created_at)]);
    view.replaceChildren(el("h1", {}, "Evals"),
      el("p", { class: "muted" }, "Eval runs are started with studio eval run SUITE."),
      table("evals-table", "Latest eval runs", ["run", "suite", "status", "created"], rows));
  };

  Studio.renderEval = async function renderEval(view, id) {
    const { el, api } = Studio;
    view.replaceChildren(el("h1", {}, "Eval"), el("p", { class: "muted" }, "Loading…"));
    let run;
    try {
      run = await api("/api/evals/" + encodeURIComponent(id));
    } catch (error) {
      Studio.problem(view, "Eval", error);
      return;
    }
    const cells = run.cells.map((cell) => [
      cell.cell, cell.resolved + "/" + cell.graded, percent(cell.pass_rate),
      percent(cell.ci_low) + " – " + percent(cell.ci_high), dollars(cell.cost_per_resolved),
      dollars(cell.cost_per_task), String(cell.tokens), String(cell.turns)]);
    const items = run.items.map((item) => [
      item.task_id, item.cell, String(item.repeat),
      item.resolved === null || item.resolved === undefined ? item.status
        : (item.resolved ? "yes" : "no"),
      (item.tests_failed || []).join(", "), dollars(item.cost_usd), String(item.turns),
      item.error_code || "",
      item.execution_id ? el("a", { href: "#/runs/" + encodeURIComponent(item.execution_id) },
                             item.execution_id.slice(0, 8)) : ""]);
    view.replaceChildren(
      el("h1", { id: "eval-title" }, "Eval " + run.id),
      el("p", {}, "Suite " + run.suite + ", status " + run.status + "."),
      table("eval-matrix", "Matrix: pass rate with its 95% interval (Wilson)",
            ["cell", "resolved", "pass rate", "95% interval", "cost/resolved", "cost/task",
             "tokens", "turns"], cells),
      table("eval-items", "Tasks",
            ["task", "cell", "#", "resolved", "failing tests", "cost", "turns", "error", "run"],
            items));
  };
})();
