// Operators (admin scope): runtime settings with where each value comes from, the kill switch
// (with confirmation), today's spend per repository against its daily budget, the provider
// matrix, and the dead-letter queue (retry or discard, with confirmation).
"use strict";

(() => {
  const { el, badge, api, money } = Studio;

  function editor(setting) {
    const id = "setting-" + setting.key;
    if (setting.type === "bool") {
      return el("select", { id, "aria-label": setting.key },
                ...["true", "false"].map((v) => el("option", {
                  value: v, selected: String(setting.value) === v }, v)));
    }
    // the bounds the API enforces, shown by the form (the API refuses anything else, 422)
    return el("input", { id, "aria-label": setting.key, type: "number",
                         "aria-describedby": "bounds-" + setting.key,
                         min: setting.minimum === null ? null : String(setting.minimum),
                         max: setting.maximum === null ? null : String(setting.maximum),
                         step: setting.type === "int" ? "1" : "any",
                         value: String(setting.value) });
  }

  function bounds(setting) {
    if (setting.type === "bool") return "true or false";
    const unit = setting.unit ? " " + setting.unit : "";
    const kind = setting.type === "int" ? "whole number" : "number";
    return kind + (setting.exclusive_minimum ? " > " : " ≥ ") + setting.minimum +
      ", ≤ " + setting.maximum + unit;
  }

  // The typed value as JSON for the API: never rounded here (1.5 for an integer setting goes
  // to the API as 1.5 and is refused there, with the bound); null when it is not a number.
  function parse(setting, raw) {
    if (setting.type === "bool") return raw === "true";
    const text = String(raw).trim();
    if (text === "" || !Number.isFinite(Number(text))) return null;
    return Number(text);
  }

  async function settingsSection(status) {
    const body = el("tbody", { id: "settings" });
    const data = await api("/api/operator/settings");
    const rows = new Map();
    async function redraw(savedText) {
      // the rows are updated in place: the message (and the focus) stay where they are
      const fresh = await api("/api/operator/settings");
      for (const setting of fresh.settings) {
        const row = rows.get(setting.key);
        if (!row) continue;
        row.value.textContent = String(setting.value);
        row.source.textContent = setting.source;
        row.input.value = String(setting.value);
      }
      Studio.message(status, savedText);
    }
    for (const setting of data.settings) {
      if (setting.key === "killswitch_engaged") continue;  // its own section, with confirmation
      const input = editor(setting);
      const save = el("button", { type: "button", id: "save-" + setting.key }, "Save");
      const reset = el("button", { type: "button", id: "reset-" + setting.key },
                       "Reset to default");
      save.addEventListener("click", async () => {
        const value = parse(setting, input.value);
        if (value === null) {
          Studio.message(status, setting.key + ": enter a " + bounds(setting) + ".", true);
          return;
        }
        try {
          const saved = await api("/api/settings/" + encodeURIComponent(setting.key),
                                  { method: "PUT", body: { value } });
          await redraw(setting.key + " saved: " + String(saved.value) + ".");
        } catch (error) {
          Studio.message(status, String(error.message || error), true);
        }
      });
      reset.addEventListener("click", async () => {
        try {
          const saved = await api("/api/settings/" + encodeURIComponent(setting.key),
                                  { method: "DELETE" });
          await redraw(setting.key + " reset to its default: " + String(saved.value) + ".");
        } catch (error) {
          Studio.message(status, String(error.message || error), true);
        }
      });
      const value = el("td", { class: "value" }, String(setting.value));
      const source = el("td", { class: "source" }, setting.source);
      rows.set(setting.key, { value, source, input });
      body.append(el("tr", { "data-key": setting.key },
        el("td", {}, el("code", {}, setting.key)), value, source,
        el("td", {}, String(setting.default)),
        el("td", { class: "change" }, input, " ", save, " ", reset,
           el("span", { id: "bounds-" + setting.key, class: "muted bounds" }, bounds(setting))),
        el("td", { class: "muted" }, setting.help)));
    }
    return el("section", { "aria-labelledby": "settings-title" },
      el("h2", { id: "settings-title" }, "Runtime settings"),
      el("div", { class: "scroll" },
         el("table", { class: "stacked" },
            el("thead", {}, el("tr", {}, ...["setting", "value", "source", "default", "change",
                                             "what it does"].map(
              (name) => el("th", { scope: "col" }, name)))), body)));
  }

  async function killSwitchSection(status) {
    const data = await api("/api/killswitch");
    const engaged = Boolean(data.engaged);
    const button = el("button", { id: "killswitch-toggle", type: "button",
                                  class: engaged ? "" : "danger" },
                      engaged ? "Release the kill switch" : "Engage the kill switch");
    button.addEventListener("click", async () => {
      const sure = await Studio.confirmAction(
        engaged ? "Release the kill switch?" : "Engage the kill switch?",
        engaged ? "Executions may run again." : "Every execution stops before its next model " +
          "or tool call, and none starts.",
        engaged ? "Release" : "Engage");
      if (!sure) return;
      try {
        await api("/api/killswitch", { method: "PUT", body: { engaged: !engaged } });
        await Studio.refreshKillSwitch();
        Studio.route();
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    });
    return el("section", { "aria-labelledby": "kill-title" },
      el("h2", { id: "kill-title" }, "Kill switch"),
      el("p", {}, "State: ", badge(engaged ? "engaged" : "released",
                                   { id: "operators-killswitch" })), button);
  }

  async function spendSection() {
    const data = await api("/api/operator/spend");
    const body = el("tbody", { id: "spend" }, ...data.repositories.map((row) => el("tr", {},
      el("td", { "data-label": "repository" }, row.repository),
      el("td", { "data-label": "spent" }, money(row.spent_usd)),
      el("td", { "data-label": "refused" }, money(row.overflow_usd)),
      el("td", { "data-label": "daily budget" }, money(row.budget_usd)),
      el("td", { "data-label": "used" },
         Math.round(100 * row.spent_usd / (row.budget_usd || 1)) + "%"))));
    return el("section", { "aria-labelledby": "spend-title" },
      el("h2", { id: "spend-title" }, "Spend today (" + data.day + ", UTC)"),
      data.repositories.length ? null : el("p", { class: "muted" }, "Nothing spent today."),
      el("table", { class: "stacked" }, el("thead", {}, el("tr", {}, ...["repository", "spent",
                                                                          "refused",
                                                       "daily budget", "used"].map(
        (name) => el("th", { scope: "col" }, name)))), body));
  }

  // GitHub triggers: each repository's rule, the latest deliveries and the busy slots (all of it
  // text: labels, logins and details come from GitHub users)
  function table(id, names, rows) {
    return el("table", { class: "stacked" },
      el("thead", {}, el("tr", {}, ...names.map((name) => el("th", { scope: "col" }, name)))),
      el("tbody", { id }, ...rows.map((cells) => el("tr", {}, ...cells.map((cell, index) =>
        el("td", { "data-label": names[index] }, cell === null ? "" : String(cell)))))));
  }

  async function triggersSection() {
    const rules = await api("/api/triggers");
    const activity = await api("/api/triggers/activity");
    const busy = activity.slots.filter((slot) => slot.state !== "idle");
    return el("section", { "aria-labelledby": "triggers-title" },
      el("h2", { id: "triggers-title" }, "GitHub triggers"),
      rules.triggers.length ? table("triggers", ["repository", "label", "assignee", "command",
                                                 "provider", "model", "enabled", "review"],
        rules.triggers.map((t) => [t.repository, t.label, t.assignee, t.command, t.provider,
                                   t.model, t.enabled ? "yes" : "no",
                                   t.review ? "yes" : "no"]))
        : el("p", { class: "muted" }, "No repository has a trigger."),
      el("h3", {}, "Latest deliveries"),
      table("deliveries", ["received", "event", "repository", "sender", "outcome", "execution"],
        activity.deliveries.slice(0, 20).map((d) => [
          d.received_at, d.event + (d.action ? " / " + d.action : ""),
          (d.repository || "") + (d.number ? "#" + d.number : ""), d.sender,
          d.outcome + (d.detail ? ": " + d.detail : ""), d.execution_id])),
      el("h3", {}, "Busy pull requests and issues"),
      busy.length ? table("slots", ["slot", "state", "execution", "pending comments"],
        busy.map((slot) => [slot.repository + "#" + slot.number, slot.state, slot.execution_id,
                            slot.pending_comments]))
        : el("p", { class: "muted" }, "None."));
  }

  // Each team's UTC month against its monthly budget (text cells only).
  async function teamsSection() {
    const data = await api("/api/operator/teams");
    const body = el("tbody", { id: "team-months" }, ...data.teams.map((row) => el("tr", {},
      el("td", { "data-label": "team" }, row.team),
      el("td", { "data-label": "spent" }, money(row.spent_usd)),
      el("td", { "data-label": "monthly budget" },
         row.budget_usd === null ? "none" : money(row.budget_usd)),
      el("td", { "data-label": "used" }, row.percent === null ? "" : row.percent + "%"),
      el("td", { "data-label": "alerts" },
         row.alerts.length ? row.alerts.map((t) => t + "%").join(", ") : "none"))));
    const month = data.teams.length ? data.teams[0].month : "";
    return el("section", { "aria-labelledby": "teams-title" },
      el("h2", { id: "teams-title" }, "Teams this month (" + month + ", UTC)"),
      el("table", { class: "stacked" }, el("thead", {}, el("tr", {}, ...["team", "spent",
        "monthly budget", "used", "alerts"].map((name) => el("th", { scope: "col" }, name)))),
         body));
  }

  // Executions whose every attempt ended with an infrastructure error: retried (from their
  // checkpoint) or discarded by an admin. Every value is shown as text.
  async function deadLetterSection(status) {
    const data = await api("/api/executions?status=dead_lettered&limit=100");
    const act = (row, action) => async () => {
      const sure = await Studio.confirmAction(
        action === "retry" ? "Retry this execution?" : "Discard this execution?",
        action === "retry" ? "It is queued again and resumes from its checkpoint."
          : "It ends failed; it is not retried again.",
        action === "retry" ? "Retry" : "Discard");
      if (!sure) return;
      try {
        await api("/api/executions/" + encodeURIComponent(row.id) + "/" + action,
                  { method: "POST" });
        Studio.message(status, row.id + ": " + (action === "retry" ? "queued again."
                                                                    : "discarded."));
        Studio.route();
      } catch (error) {
        Studio.message(status, String(error.message || error), true);
      }
    };
    const body = el("tbody", { id: "dead-letters" }, ...data.executions.map((row) => {
      const last = row.last_error || {};
      const retry = el("button", { type: "button", class: "dlq-retry" }, "Retry");
      const drop = el("button", { type: "button", class: "danger dlq-discard" }, "Discard");
      retry.addEventListener("click", act(row, "retry"));
      drop.addEventListener("click", act(row, "discard"));
      return el("tr", { "data-id": row.id },
        el("td", { "data-label": "execution" },
           el("a", { href: "#/runs/" + encodeURIComponent(row.id) }, el("code", {}, row.id))),
        el("td", { "data-label": "attempts" }, String((row.attempt_errors || []).length)),
        el("td", { "data-label": "last error" }, String(last.code || "") + ": " +
                                                  String(last.message || "")),
        el("td", { "data-label": "at" }, String(last.at || "")),
        el("td", { "data-label": "action" }, retry, " ", drop));
    }));
    return el("section", { "aria-labelledby": "dead-letters-title" },
      el("h2", { id: "dead-letters-title" }, "Dead-letter queue"),
      data.executions.length ? null
        : el("p", { class: "muted", id: "dead-letters-empty" }, "No dead-lettered execution."),
      el("table", { class: "stacked" }, el("thead", {}, el("tr", {}, ...["execution", "attempts",
                                                                         "last error", "at",
                                                                         "action"].map(
        (name) => el("th", { scope: "col" }, name)))), body));
  }

  // A provider's capabilities as a definition list, its guards as another (text, wrapped):
  // one card per provider, never one wide table.
  function describe(value) {
    if (value === null || value === undefined) return "";
    if (typeof value !== "object") return String(value);
    return el("dl", {}, ...Object.entries(value).flatMap(([key, item]) => [
      el("dt", {}, key), el("dd", {}, describe(item))]));
  }

  async function providersSection() {
    const data = await api("/api/providers");
    return el("section", { "aria-labelledby": "providers-title" },
      el("h2", { id: "providers-title" }, "Providers"),
      el("div", { id: "provider-matrix", class: "cards" }, ...data.providers.map((row) => {
        const name = String(row.provider || "");
        const plain = Object.fromEntries(Object.entries(row).filter(
          ([key, value]) => key !== "provider" && (typeof value !== "object" || value === null)));
        const nested = Object.entries(row).filter(
          ([, value]) => typeof value === "object" && value !== null);
        return el("article", { class: "card provider", "data-provider": name },
          el("h3", {}, name), describe(plain),
          ...nested.map(([key, value]) => el("details", {}, el("summary", {}, key),
                                              describe(value))));
      })));
  }

  Studio.renderOperators = async function renderOperators(view) {
    const status = el("p", { id: "operators-message", class: "message", role: "status" });
    view.replaceChildren(el("h1", {}, "Operators"), status);
    const shown = Studio.current();
    try {
      const sections = [await killSwitchSection(status), await deadLetterSection(status),
                        await settingsSection(status), await spendSection(),
                        await triggersSection(), await teamsSection(),
                        await providersSection()];
      if (shown()) view.append(...sections);
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  };
})();
