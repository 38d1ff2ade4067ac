// The runs list: one page of executions at a time (filters: status, provider, repository,
// standalone or flowchart node; search by id or branch), each with its title (the prompt's
// first line), times and duration; node executions grouped under their flowchart run. It is
// read again every 4 s with one request of one page, and the rows are updated in place: the
// focus, the scroll and what is typed in the filters stay.
"use strict";

(() => {
  const PAGE = 25;
  const STATUSES = ["queued", "claimed", "running", "awaiting_approval", "finalizing",
                    "succeeded", "failed", "cancelled", "stalled"];
  const PROVIDERS = ["replay", "codex", "gemini", "claude", "command"];
  const COLUMNS = ["run", "status", "provider", "repository", "created", "duration", "cost"];

  function title(execution) {
    const line = String(execution.prompt || "").split("\n").find((l) => l.trim()) || "";
    const text = line.trim();
    return text ? (text.length > 120 ? text.slice(0, 119) + "…" : text) : execution.id.slice(0, 8);
  }

  Studio.renderRuns = async function renderRuns(view) {
    const { el, badge, api, when, money } = Studio;
    const status = el("p", { id: "list-message", class: "message", role: "status" },
                      "Loading…");
    const body = el("tbody", { id: "executions", "data-loads": "0" });
    const select = (id, label, values) => el("label", { for: id }, label,
      el("select", { id }, el("option", { value: "" }, "any"),
         ...values.map(([value, text]) => el("option", { value }, text))));
    const search = el("input", { id: "runs-search", type: "search",
                                 placeholder: "id or branch", maxlength: "200" });
    const repo = el("input", { id: "runs-repo", type: "search", placeholder: "exact URL",
                               maxlength: "2048" });
    const filters = el("form", { id: "runs-filters", class: "filters", role: "search" },
      el("label", { for: "runs-search" }, "Search", search),
      select("runs-status", "Status", STATUSES.map((s) => [s, s])),
      select("runs-provider", "Provider", PROVIDERS.map((p) => [p, p])),
      el("label", { for: "runs-repo" }, "Repository", repo),
      select("runs-kind", "Kind", [["standalone", "standalone runs"],
                                   ["node", "flowchart nodes"]]));
    const previous = el("button", { id: "runs-previous", type: "button" }, "Previous");
    const next = el("button", { id: "runs-next", type: "button" }, "Next");
    const pageLabel = el("span", { id: "runs-page" }, "page 1");
    view.replaceChildren(
      el("h1", {}, "Runs"),
      el("p", {}, el("a", { href: "#/new" }, "Start a new run")),
      filters, status,
      el("table", { class: "stacked", id: "runs-table" },
         el("thead", {}, el("tr", {}, ...COLUMNS.map((name) => el("th", { scope: "col" },
                                                                   name)))), body),
      el("div", { class: "pager" }, previous, pageLabel, next));
    let page = 0;
    const rows = new Map();   // id -> {tr, cells}
    const groups = new Map(); // flowchart run id -> tr

    function query() {
      const params = new URLSearchParams({ limit: String(PAGE + 1),
                                           offset: String(page * PAGE) });
      const add = (name, value) => { if (value) params.set(name, value); };
      add("search", search.value.trim());
      add("status", document.getElementById("runs-status").value);
      add("provider", document.getElementById("runs-provider").value);
      add("repo_url", repo.value.trim());
      add("kind", document.getElementById("runs-kind").value);
      return "/api/executions?" + params.toString();
    }

    function set(node, value) {
      if (node.textContent !== value) node.textContent = value;
    }

    function row(execution) {
      let entry = rows.get(execution.id);
      if (!entry) {
        const cells = Object.fromEntries(COLUMNS.map((name) => [name, el("td", {
          "data-label": name, class: "col-" + name })]));
        const anchor = el("a", { href: "#/runs/" + encodeURIComponent(execution.id),
                                 class: "run-title" });
        const id = el("code", { class: "run-short-id muted" }, execution.id.slice(0, 8));
        cells.run.append(anchor, " ", id);
        const stateBadge = badge("");
        cells.status.append(stateBadge);
        const tr = el("tr", { "data-id": execution.id }, ...COLUMNS.map((name) => cells[name]));
        entry = { tr, cells, anchor, stateBadge };
        rows.set(execution.id, entry);
      }
      set(entry.anchor, title(execution));
      const shown = execution.paused_reason ? "paused (kill switch)" : execution.status;
      if (entry.stateBadge.textContent !== shown) Studio.setBadge(entry.stateBadge, shown);
      set(entry.cells.provider, execution.provider + (execution.model ? " · " +
                                                      execution.model : ""));
      set(entry.cells.repository, execution.repo_url || execution.workspace || "");
      set(entry.cells.created, when(execution.created_at));
      set(entry.cells.duration, Studio.between(execution.started_at, execution.finished_at));
      set(entry.cells.cost, money(execution.cost_usd));
      entry.tr.classList.toggle("child", Boolean(execution.flowchart_run_id));
      return entry.tr;
    }

    function group(runId) {
      let tr = groups.get(runId);
      if (!tr) {
        tr = el("tr", { class: "group", "data-flowchart-run": runId },
                el("td", { colspan: String(COLUMNS.length) }, "flowchart run ",
                   el("a", { href: "#/flowchart-runs/" + encodeURIComponent(runId) },
                      runId.slice(0, 8))));
        groups.set(runId, tr);
      }
      return tr;
    }

    // The rows in order: each flowchart run's node executions together, under its heading, at
    // the place of its most recent one.
    function ordered(executions) {
      const wanted = [];
      const placed = new Set();
      for (const execution of executions) {
        const runId = execution.flowchart_run_id;
        if (!runId) { wanted.push(row(execution)); continue; }
        if (placed.has(runId)) continue;
        placed.add(runId);
        wanted.push(group(runId));
        for (const member of executions.filter((e) => e.flowchart_run_id === runId)) {
          wanted.push(row(member));
        }
      }
      return wanted;
    }

    async function load() {
      try {
        const data = await api(query());
        const executions = data.executions.slice(0, PAGE);
        const wanted = ordered(executions);
        const current = [...body.children];
        if (wanted.length !== current.length || wanted.some((tr, i) => tr !== current[i])) {
          // only what changed moves: a row that stays keeps its place (and the focus in it)
          for (const tr of current) if (!wanted.includes(tr)) tr.remove();
          wanted.forEach((tr, index) => {
            if (body.children[index] !== tr) body.insertBefore(tr, body.children[index] || null);
          });
        }
        previous.disabled = page === 0;
        next.disabled = data.executions.length <= PAGE;
        set(pageLabel, "page " + (page + 1));
        body.setAttribute("data-loads", String(Number(body.getAttribute("data-loads")) + 1));
        const filtered = new URL(query(), location.href).searchParams.size > 2;
        Studio.message(status, executions.length ? "" : (filtered || page
          ? "No runs match." : "No runs yet."));
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    }

    let timer = null;
    const reload = () => { clearTimeout(timer); timer = setTimeout(load, 250); };
    Studio.onLeave(() => clearTimeout(timer));
    filters.addEventListener("submit", (event) => { event.preventDefault(); page = 0; load(); });
    filters.addEventListener("input", () => { page = 0; reload(); });
    filters.addEventListener("change", () => { page = 0; reload(); });
    previous.addEventListener("click", () => { page = Math.max(0, page - 1); load(); });
    next.addEventListener("click", () => { page += 1; load(); });
    const shown = Studio.current();
    await load();
    if (shown()) Studio.every(4000, load);
  };
})();
