// The runs list: the most recent executions, each linking to its run page.
"use strict";

Studio.renderRuns = async function renderRuns(view) {
  const { el, badge, api, when, money } = Studio;
  const status = el("p", { id: "list-message", class: "message" }, "Loading…");
  const body = el("tbody", { id: "executions" });
  view.replaceChildren(
    el("h1", {}, "Runs"),
    el("p", {}, el("a", { href: "#/new" }, "Start a new run")),
    status,
    el("table", {}, el("thead", {}, el("tr", {}, ...["run", "status", "provider", "repository",
                                                      "cost", "created"].map(
      (name) => el("th", { scope: "col" }, name)))), body));
  async function load() {
    try {
      const data = await api("/api/executions?limit=100");
      body.replaceChildren(...data.executions.map((execution) => el(
        "tr", { "data-id": execution.id },
        el("td", {}, el("a", { href: "#/runs/" + encodeURIComponent(execution.id) },
                        execution.id.slice(0, 8))),
        el("td", {}, badge(execution.paused_reason ? "paused (kill switch)" : execution.status)),
        el("td", {}, execution.provider + " · " + execution.model),
        el("td", {}, execution.repo_url || execution.workspace || ""),
        el("td", {}, money(execution.cost_usd)),
        el("td", {}, when(execution.created_at)))));
      Studio.message(status, data.executions.length ? "" : "No runs yet.");
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  }
  await load();
  Studio.every(4000, load);
};
