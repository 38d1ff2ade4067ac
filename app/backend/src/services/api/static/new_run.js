// The new-run form: repository URL, base branch, provider, model, prompt, PR on/off, limits (and
// the replay script for the replay provider). Posts to /api/executions and opens the run page.
"use strict";

Studio.renderNewRun = function renderNewRun(view) {
  const { el, api } = Studio;
  const row = (label, id, input) => [el("label", { for: id }, label), input];
  const text = (id, attrs) => el("input", Object.assign({ id, name: id, type: "text" }, attrs));
  const number = (id, step) => el("input", { id, name: id, type: "number", min: "0", step });
  const provider = el("select", { id: "run-provider-input", name: "provider" },
                      ...["replay", "codex", "gemini", "claude"].map(
                        (name) => el("option", { value: name }, name)));
  const form = el("form", { id: "new-run-form", class: "stack" },
    ...row("Repository URL", "run-repo-url", text("run-repo-url",
                                                  { required: true, placeholder: "https://…" })),
    ...row("Base branch", "run-base-branch", text("run-base-branch",
                                                  { placeholder: "the remote's default" })),
    ...row("Provider", "run-provider-input", provider),
    ...row("Model", "run-model", text("run-model", { placeholder: "the provider's default" })),
    ...row("Prompt", "run-prompt-input", el("textarea", { id: "run-prompt-input", required: true })),
    ...row("Open a pull request", "run-pr", el("input", { id: "run-pr", type: "checkbox" })),
    ...row("Max iterations", "run-max-iterations", number("run-max-iterations", "1")),
    ...row("Max budget (USD)", "run-max-budget", number("run-max-budget", "0.01")),
    ...row("Wall clock (s)", "run-wall-clock", number("run-wall-clock", "1")),
    ...row("Stall (s)", "run-stall", number("run-stall", "1")),
    ...row("Replay script (JSON, replay only)", "run-script",
           el("textarea", { id: "run-script" })),
    el("span", {}), el("button", { id: "run-submit", type: "submit" }, "Start run"));
  const status = el("p", { id: "new-run-message", class: "message", role: "status" });
  view.replaceChildren(el("h1", {}, "New run"), el("section", {}, form, status));
  const value = (id) => document.getElementById(id).value.trim();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { repo_url: value("run-repo-url"), provider: provider.value,
                   prompt: document.getElementById("run-prompt-input").value,
                   pull_request: document.getElementById("run-pr").checked };
    if (value("run-base-branch")) body.base_branch = value("run-base-branch");
    if (value("run-model")) body.model = value("run-model");
    const limits = {};
    for (const [id, key] of [["run-max-iterations", "max_iterations"],
                             ["run-max-budget", "max_budget_usd"],
                             ["run-wall-clock", "wall_clock_s"], ["run-stall", "stall_s"]]) {
      if (value(id)) limits[key] = Number(value(id));
    }
    if (Object.keys(limits).length) body.limits = limits;
    if (value("run-script")) {
      try {
        body.replay_script = JSON.parse(value("run-script"));
      } catch (error) {
        Studio.message(status, "The replay script is not JSON: " + error.message, true);
        return;
      }
    }
    try {
      const created = await api("/api/executions", { method: "POST", body });
      location.hash = "#/runs/" + encodeURIComponent(created.id);
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  });
};
