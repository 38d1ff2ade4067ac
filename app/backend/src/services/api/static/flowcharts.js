// Flowcharts: the list; one flowchart's graph (laid out by the vendored dagre, drawn as SVG with
// node types and edge conditions), a form to start a run with inputs, its runs; a run's page
// with the node states live, each agent node linking to its execution's run page, each node's
// detail (inputs, output, timing, execution) a click away, cancel and retry. The layout
// library is loaded only by these graph pages.
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
      if (!body.isConnected) return;
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
    const shown = Studio.current();
    let chart;
    try {
      chart = await api("/api/flowcharts/" + encodeURIComponent(flowchartId));
      await Studio.loadGraphLibrary();
    } catch (error) {
      if (shown()) Studio.problem(view, "Flowchart not found", error);
      return;
    }
    if (!shown()) return;
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

  function json(value) {
    return JSON.stringify(value === undefined ? null : value, null, 2);
  }

  // One node of a run: its inputs (its configuration and the run's inputs), its output, its
  // timing and its execution.
  function nodeDetail(id, node, graphNode, run, note) {
    const field = (label, value) => [el("dt", {}, label), el("dd", {}, value)];
    const result = node.result;
    const output = [];
    if (result && typeof result === "object" && "exit_code" in result) {
      output.push(el("p", { class: "exit-code" }, "exit code " + result.exit_code +
                        (result.timed_out ? " (timed out)" : "")),
                  ...Studio.commandOutput(result, { execution: node.execution_id },
                                          "node-" + id.replace(/[^A-Za-z0-9_-]/g, "_"), note));
    } else if (result !== null && result !== undefined) {
      output.push(el("pre", { class: "node-result" }, json(result)));
    } else {
      output.push(el("p", { class: "muted" }, "No output recorded."));
    }
    return el("section", { id: "node-detail", class: "node-detail",
                           "aria-labelledby": "node-detail-title", "data-node-id": id },
      el("h2", { id: "node-detail-title" }, "Node ", el("code", {}, id)),
      el("dl", {}, ...field("type", node.type || ""), ...field("state", badge(node.state)),
         ...field("started", Studio.when(node.started_at)),
         ...field("ended", Studio.when(node.finished_at)),
         ...field("duration", Studio.between(node.started_at, node.finished_at)),
         ...field("execution", node.execution_id
           ? el("a", { href: "#/runs/" + encodeURIComponent(node.execution_id),
                       id: "node-detail-execution" }, node.execution_id) : "none"),
         ...field("error", node.error_code ? node.error_code + ": " +
                  (node.error_message || "") : "")),
      el("h3", {}, "Inputs"),
      el("pre", { class: "node-config" }, json((graphNode || {}).config || {})),
      el("p", { class: "muted" }, "the run's inputs:"),
      el("pre", { class: "run-inputs" }, json(run.inputs || {})),
      el("h3", {}, "Output"), ...output);
  }

  Studio.renderFlowchartRun = async function renderFlowchartRun(view, runId) {
    const status = el("p", { id: "flowchart-run-message", class: "message", role: "status" });
    const state = badge("…", { id: "flowchart-run-status" });
    const timing = el("span", { id: "flowchart-run-timing", class: "muted" });
    const graphBox = el("section", { "aria-label": "Graph", id: "flowchart-run-graph" });
    const nodes = el("tbody", { id: "flowchart-run-nodes" });
    const detailBox = el("div", { id: "node-detail-box" });
    const cancel = el("button", { id: "flowchart-run-cancel", type: "button", class: "danger" },
                      "Cancel run");
    const retry = el("button", { id: "flowchart-run-retry", type: "button" },
                     "Run again with the same inputs");
    const shown = Studio.current();
    let first;
    try {
      first = await api("/api/flowchart-runs/" + encodeURIComponent(runId));
      await Studio.loadGraphLibrary();
    } catch (error) {
      if (shown()) Studio.problem(view, "Flowchart run not found", error);
      return;
    }
    let graph = null;
    try {
      graph = (await api("/api/flowcharts/" + encodeURIComponent(first.flowchart_id))).graph;
    } catch (error) {
      Studio.message(status, "The flowchart is gone: " + String(error.message || error), true);
    }
    if (!shown()) return;
    view.replaceChildren(
      el("h1", {}, "Flowchart run ", el("code", {}, runId)),
      el("p", {}, "status ", state, " ", timing), el("div", { class: "actions" }, cancel, retry),
      status, graphBox,
      el("section", { "aria-labelledby": "nodes-title" }, el("h2", { id: "nodes-title" }, "Nodes"),
         el("table", { class: "stacked" }, el("thead", {}, el("tr", {}, ...["node", "type",
                                                                           "state", "duration",
                                                                           "execution",
                                                                           "error"].map(
           (name) => el("th", { scope: "col" }, name)))), nodes)),
      detailBox);
    let run = first;
    let done = false;
    let drawn = "";
    let selected = null;
    let shownDetail = "";
    const graphNodes = new Map(((graph || {}).nodes || []).map((n) => [String(n.id), n]));

    function showDetail() {
      if (selected === null || !run.nodes[selected]) return;
      const seen = JSON.stringify(run.nodes[selected]) + selected;
      if (seen === shownDetail) return;  // drawn again only when it changed (a search is kept)
      shownDetail = seen;
      detailBox.replaceChildren(nodeDetail(selected, run.nodes[selected],
                                           graphNodes.get(selected), run, status));
    }

    function draw() {
      Studio.setBadge(state, run.status);
      timing.textContent = run.started_at
        ? "· " + Studio.between(run.started_at, run.finished_at) : "";
      const final = ["succeeded", "failed", "cancelled"].includes(run.status);
      cancel.disabled = final;
      retry.disabled = !final;
      const seen = JSON.stringify(run.nodes);
      if (seen !== drawn) {  // redrawn only when a node changed
        drawn = seen;
        if (graph) graphBox.replaceChildren(drawGraph(graph, run.nodes));
        nodes.replaceChildren(...Object.entries(run.nodes).map(([id, node]) => {
          const open = el("button", { type: "button", class: "node-open", "data-node-id": id,
                                      "aria-label": "Open node " + id }, id);
          open.addEventListener("click", () => {
            selected = id;
            shownDetail = "";
            showDetail();
            document.getElementById("node-detail-title").scrollIntoView();
          });
          return el("tr", { "data-node-id": id },
            el("td", { "data-label": "node" }, open),
            el("td", { "data-label": "type" }, node.type || ""),
            el("td", { "data-label": "state" }, badge(node.state)),
            el("td", { "data-label": "duration", class: "duration" },
               Studio.between(node.started_at, node.finished_at)),
            el("td", { "data-label": "execution" }, node.execution_id
              ? el("a", { href: "#/runs/" + encodeURIComponent(node.execution_id) },
                   node.execution_id.slice(0, 8)) : ""),
            el("td", { "data-label": "error" }, node.error_code
              ? node.error_code + ": " + (node.error_message || "") : ""));
        }));
      }
      showDetail();
      done = final;
    }

    cancel.addEventListener("click", async () => {
      const sure = await Studio.confirmAction(
        "Cancel this flowchart run?", "Every running node is asked to stop.", "Cancel run");
      if (!sure) return;
      try {
        run = await api("/api/flowchart-runs/" + encodeURIComponent(runId) + "/cancel",
                        { method: "POST" });
        Studio.message(status, "Cancellation requested.");
        done = false;
        draw();
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    });
    retry.addEventListener("click", async () => {
      try {
        const again = await api("/api/flowcharts/" + encodeURIComponent(run.flowchart_id) +
                                "/runs", { method: "POST", body: { inputs: run.inputs || {} } });
        location.hash = "#/flowchart-runs/" + encodeURIComponent(again.id);
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    });

    async function load() {
      if (done) return;
      try {
        run = await api("/api/flowchart-runs/" + encodeURIComponent(runId));
        draw();
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    }
    draw();
    Studio.every(700, load);
  };
})();
