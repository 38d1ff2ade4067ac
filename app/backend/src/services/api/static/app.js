// The pages' router (#/runs, #/runs/ID, #/new, #/flowcharts, #/flowcharts/ID,
// #/flowchart-runs/ID, #/operators, #/evals, #/evals/ID), the token form and the kill-switch banner on every page.
"use strict";

(() => {
  const view = document.getElementById("view");
  const ROUTES = [
    [/^#\/runs\/([A-Za-z0-9._-]+)$/, (id) => Studio.renderRun(view, id), "nav-runs"],
    [/^#\/new$/, () => Studio.renderNewRun(view), "nav-new"],
    [/^#\/flowcharts\/([0-9a-f-]+)$/, (id) => Studio.renderFlowchart(view, id), "nav-flowcharts"],
    [/^#\/flowchart-runs\/([0-9a-f-]+)$/, (id) => Studio.renderFlowchartRun(view, id),
     "nav-flowcharts"],
    [/^#\/flowcharts$/, () => Studio.renderFlowcharts(view), "nav-flowcharts"],
    [/^#\/operators$/, () => Studio.renderOperators(view), "nav-operators"],
    [/^#\/evals\/([A-Za-z0-9._-]+)$/, (id) => Studio.renderEval(view, id), "nav-evals"],
    [/^#\/evals$/, () => Studio.renderEvals(view), "nav-evals"],
    [/^(#\/runs)?$/, () => Studio.renderRuns(view), "nav-runs"],
  ];

  Studio.route = function route() {
    Studio.leave();
    if (!Studio.state.tokenRefused) Studio.alert(null);
    for (const link of document.querySelectorAll("nav a")) link.removeAttribute("aria-current");
    if (!Studio.state.token || Studio.state.tokenRefused) {
      view.replaceChildren(Studio.el("h1", {}, "Studio"),
                           Studio.el("p", {}, "Enter an API token above to start."));
      return;
    }
    for (const [pattern, render, nav] of ROUTES) {
      const match = location.hash.match(pattern);
      if (match) {
        document.getElementById(nav).setAttribute("aria-current", "page");
        render(match[1] ? decodeURIComponent(match[1]) : undefined);
        return;
      }
    }
    view.replaceChildren(Studio.el("h1", {}, "Not found"),
                         Studio.el("p", {}, Studio.el("a", { href: "#/runs" }, "Runs")));
  };

  Studio.refreshKillSwitch = async function refreshKillSwitch() {
    const banner = document.getElementById("killswitch-banner");
    const state = document.getElementById("killswitch-state");
    if (!Studio.state.token) return;
    try {
      const data = await Studio.api("/api/killswitch");
      state.textContent = data.engaged ? "ENGAGED: executions stop" : "released";
      banner.classList.toggle("engaged", Boolean(data.engaged));
    } catch (error) {
      state.textContent = error.status === 401 ? "unknown"
        : "unknown (" + (error.code || "error") + ")";
    }
  };

  // A token is checked once when it is set: a refused one is said once, at the top, and no
  // page is drawn with it (a token without the read scope is still a token: pages say 403).
  async function useToken(token) {
    Studio.state.token = token;
    Studio.state.tokenRefused = false;
    Studio.alert(null);
    if (token) sessionStorage.setItem(Studio.TOKEN_KEY, token);
    else sessionStorage.removeItem(Studio.TOKEN_KEY);
    const shown = document.getElementById("token-state");
    shown.textContent = token ? "checking token" : "no token";
    if (token) {
      try {
        await Studio.api("/api/killswitch");
        shown.textContent = "token set";
      } catch (error) {
        if (error.status === 401) {
          Studio.state.tokenRefused = true;
          shown.textContent = "token refused";
          Studio.alert("The API refused this token (unauthorized): enter a valid one.");
        } else {
          shown.textContent = "token set";
        }
      }
    }
    Studio.refreshKillSwitch();
    Studio.route();
  }

  document.getElementById("skip-link").addEventListener("click", (event) => {
    event.preventDefault();  // the hash is the router's: focus the content instead
    view.focus();
  });

  document.getElementById("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const input = document.getElementById("token-input");
    useToken(input.value.trim());
    input.value = "";
  });
  document.getElementById("token-forget").addEventListener("click", () => useToken(""));
  window.addEventListener("hashchange", Studio.route);
  setInterval(Studio.refreshKillSwitch, 3000);
  useToken(Studio.state.token);
})();
