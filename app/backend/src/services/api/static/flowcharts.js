// Flowcharts: the list; one flowchart's graph (laid out by the vendored dagre, drawn as SVG with
// node types and edge conditions), a form to start a run with inputs, its runs; a run's page
// with the node states live, each agent node linking to its execution's run page.
"use strict";

(() => {
  const { el, svg, badge, api, when } = Studio;
  const NODE_HEIGHT = 46;

  function nodeWidth(label, type) {
    return Math.max(90, Math.min(320, 8 * Math.max(label.length, type.length) + 28));
  }

  // The graph as SVG; `states` maps node id to {state, execution_id} during a run.
  function drawGraph(graph, states) {
    const layout = new dagre.graphlib.Graph({ multigraph: true });
    layout.setGraph({ rankdir: "TB", nodesep: 40, ranksep: 50, marginx: 16, marginy: 16 });
    layout.setDefaultEdgeLabel(() => ({}));
    for (const node of graph.nodes || []) {
      const label = String(node.name || node.id);
      const type = String(node.type || "");
      layout.setNode(String(node.id), { width: nodeWidth(label, type + " · succeeded"),
                                        height: NODE_HEIGHT,
                                        label, type });
    }
    for (const edge of graph.edges || []) {
      const condition = edge.condition === undefined || edge.condition === null
        ? "" : String(edge.condition);
      layout.setEdge(String(edge.source), String(edge.target),
                     { condition, width: condition ? 7 * condition.length + 8 : 0,
                       height: condition ? 16 : 0, labelpos: "c" }, String(edge.id));
    }
    dagre.layout(layout);
    const size = layout.graph();
    const root = svg("svg", { id: "flowchart-graph", role: "group",
                              "aria-labelledby": "flowchart-graph-title",
                              viewBox: "0 0 " + Math.ceil(size.width || 10) + " " +
                                Math.ceil(size.height || 10),
                              height: Math.ceil(size.height || 10) },
      svg("title", { id: "flowchart-graph-title" }, "Flowchart graph"),
      svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
                                      markerWidth: "7", markerHeight: "7", orient: "auto" },
                          svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#6b7280" }))));
    for (const key of layout.edges()) {
      const edge = layout.edge(key);
      const d = edge.points.map((p, i) => (i ? "L" : "M") + p.x + "," + p.y).join(" ");
      const group = svg("g", { class: "edge", "data-edge-id": key.name || "",
                               "data-source": key.v, "data-target": key.w },
                        svg("path", { d, "marker-end": "url(#arrow)" }));
      if (edge.condition) {
        group.append(svg("text", { x: edge.x, y: edge.y + 4, "text-anchor": "middle",
                                   class: "condition" }, edge.condition));
      }
      root.append(group);
    }
    for (const id of layout.nodes()) {
      const node = layout.node(id);
      const info = (states || {})[id] || {};
      const state = info.state ? String(info.state).replace(/[^a-z_-]/g, "") : "";
      const group = svg("g", { class: "node " + state, "data-node-id": id,
                               "data-state": info.state || "",
                               transform: "translate(" + (node.x - node.width / 2) + "," +
                                 (node.y - node.height / 2) + ")" },
        svg("rect", { width: node.width, height: node.height, rx: "6" }),
        svg("text", { x: node.width / 2, y: 19, "text-anchor": "middle", class: "label" },
            node.label),
        svg("text", { x: node.width / 2, y: 36, "text-anchor": "middle", class: "type" },
            node.type + (info.state ? " · " + info.state : "")));
      if (info.execution_id) {
        root.append(svg("a", { href: "#/runs/" + encodeURIComponent(info.execution_id),
                               class: "node-link", "data-node-id": id }, group));
      } else {
        root.append(group);
      }
    }
    return el("div", { class: "graph" }, root);
  }

  Studio.renderFlowcharts = async function renderFlowcharts(view) {
    const status = el("p", { id: "flowcharts-message", class: "message" }, "Loading…");
    const body = el("tbody", { id: "flowcharts" });
    view.replaceChildren(el("h1", {}, "Flowcharts"), status, el("table", {},
      el("thead", {}, el("tr", {}, ...["name", "nodes", "updated"].map(
        (name) => el("th", { scope: "col" }, name)))), body));
    try {
      const data = await api("/api/flowcharts");
      body.replaceChildren(...data.flowcharts.map((chart) => el("tr", { "data-id": chart.id },
        el("td", {}, el("a", { href: "#/flowcharts/" + encodeURIComponent(chart.id) },
                        chart.name)),
        el("td", {}, String((chart.graph.nodes || []).length)),
        el("td", {}, when(chart.updated_at)))));
      Studio.message(status, data.flowcharts.length ? "" : "No flowcharts yet.");
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  };

  Studio.renderFlowchart = async function renderFlowchart(view, flowchartId) {
    const status = el("p", { id: "flowchart-message", class: "message", role: "status" });
    view.replaceChildren(el("h1", {}, "Flowchart"), status);
    let chart;
    try {
      chart = await api("/api/flowcharts/" + encodeURIComponent(flowchartId));
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
      return;
    }
    const inputs = el("textarea", { id: "flowchart-inputs" }, "{}");
    const form = el("form", { id: "flowchart-run-form", class: "stack" },
                    el("label", { for: "flowchart-inputs" }, "Inputs (JSON)"), inputs,
                    el("span", {}), el("button", { id: "flowchart-start", type: "submit" },
                                       "Start run"));
    const runs = el("tbody", { id: "flowchart-runs" });
    view.replaceChildren(
      el("h1", {}, "Flowchart ", el("span", { id: "flowchart-name" }, chart.name)),
      el("p", { id: "flowchart-description" }, chart.description || ""),
      el("section", { "aria-label": "Graph" }, drawGraph(chart.graph, null)),
      el("section", { "aria-labelledby": "start-title" },
         el("h2", { id: "start-title" }, "Start a run"), form, status),
      el("section", { "aria-labelledby": "runs-title" }, el("h2", { id: "runs-title" }, "Runs"),
         el("table", {}, el("thead", {}, el("tr", {}, ...["run", "status", "created"].map(
           (name) => el("th", { scope: "col" }, name)))), runs)));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      let parsed;
      try {
        parsed = JSON.parse(inputs.value || "{}");
      } catch (error) {
        Studio.message(status, "The inputs are not JSON: " + error.message, true);
        return;
      }
      try {
        const run = await api("/api/flowcharts/" + encodeURIComponent(flowchartId) + "/runs",
                              { method: "POST", body: { inputs: parsed } });
        location.hash = "#/flowchart-runs/" + encodeURIComponent(run.id);
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    });
    try {
      const data = await api("/api/flowcharts/" + encodeURIComponent(flowchartId) + "/runs");
      runs.replaceChildren(...data.runs.map((run) => el("tr", {},
        el("td", {}, el("a", { href: "#/flowchart-runs/" + encodeURIComponent(run.id) },
                        run.id.slice(0, 8))),
        el("td", {}, badge(run.status)), el("td", {}, when(run.created_at)))));
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  };

  Studio.renderFlowchartRun = async function renderFlowchartRun(view, runId) {
    const status = el("p", { id: "flowchart-run-message", class: "message", role: "status" });
    const state = badge("…", { id: "flowchart-run-status" });
    const graphBox = el("section", { "aria-label": "Graph", id: "flowchart-run-graph" });
    const nodes = el("tbody", { id: "flowchart-run-nodes" });
    view.replaceChildren(
      el("h1", {}, "Flowchart run ", el("code", {}, runId)),
      el("p", {}, "status ", state), status, graphBox,
      el("section", { "aria-labelledby": "nodes-title" }, el("h2", { id: "nodes-title" }, "Nodes"),
         el("table", {}, el("thead", {}, el("tr", {}, ...["node", "type", "state", "execution",
                                                          "error"].map(
           (name) => el("th", { scope: "col" }, name)))), nodes)));
    let graph = null;
    let done = false;
    async function load() {
      if (done) return;
      try {
        const run = await api("/api/flowchart-runs/" + encodeURIComponent(runId));
        if (!graph) {
          graph = (await api("/api/flowcharts/" + encodeURIComponent(run.flowchart_id))).graph;
        }
        Studio.setBadge(state, run.status);
        graphBox.replaceChildren(drawGraph(graph, run.nodes));
        nodes.replaceChildren(...Object.entries(run.nodes).map(([id, node]) => el("tr",
          { "data-node-id": id },
          el("td", {}, id), el("td", {}, node.type || ""), el("td", {}, badge(node.state)),
          el("td", {}, node.execution_id
            ? el("a", { href: "#/runs/" + encodeURIComponent(node.execution_id) },
                 node.execution_id.slice(0, 8)) : ""),
          el("td", {}, node.error_code ? node.error_code + ": " + (node.error_message || "")
                                       : ""))));
        done = ["succeeded", "failed", "cancelled"].includes(run.status);
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    }
    await load();
    Studio.every(700, load);
  };
})();
