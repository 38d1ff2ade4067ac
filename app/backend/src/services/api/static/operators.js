// Operators (admin scope): runtime settings with where each value comes from, the kill switch
// (with confirmation), today's spend per repository against its daily budget, the provider
// matrix.
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
    return el("input", { id, "aria-label": setting.key, type: "number",
                         step: setting.type === "int" ? "1" : "any",
                         value: String(setting.value) });
  }

  function parse(setting, raw) {
    if (setting.type === "bool") return raw === "true";
    return setting.type === "int" ? parseInt(raw, 10) : Number(raw);
  }

  async function settingsSection(status) {
    const body = el("tbody", { id: "settings" });
    const data = await api("/api/operator/settings");
    for (const setting of data.settings) {
      if (setting.key === "killswitch_engaged") continue;  // its own section, with confirmation
      const input = editor(setting);
      const save = el("button", { type: "button", id: "save-" + setting.key }, "Save");
      save.addEventListener("click", async () => {
        try {
          await api("/api/settings/" + encodeURIComponent(setting.key),
                    { method: "PUT", body: { value: parse(setting, input.value) } });
          Studio.message(status, setting.key + " saved.");
          Studio.route();
        } catch (error) {
          Studio.message(status, String(error.message || error), true);
        }
      });
      body.append(el("tr", { "data-key": setting.key },
        el("td", {}, el("code", {}, setting.key)),
        el("td", { class: "value" }, String(setting.value)),
        el("td", { class: "source" }, setting.source),
        el("td", {}, String(setting.default)),
        el("td", {}, input, " ", save),
        el("td", { class: "muted" }, setting.help)));
    }
    return el("section", { "aria-labelledby": "settings-title" },
      el("h2", { id: "settings-title" }, "Runtime settings"),
      el("table", {}, el("thead", {}, el("tr", {}, ...["setting", "value", "source", "default",
                                                       "change", "what it does"].map(
        (name) => el("th", { scope: "col" }, name)))), body));
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
      el("td", {}, row.repository), el("td", {}, money(row.spent_usd)),
      el("td", {}, money(row.overflow_usd)), el("td", {}, money(row.budget_usd)),
      el("td", {}, Math.round(100 * row.spent_usd / (row.budget_usd || 1)) + "%"))));
    return el("section", { "aria-labelledby": "spend-title" },
      el("h2", { id: "spend-title" }, "Spend today (" + data.day + ", UTC)"),
      data.repositories.length ? null : el("p", { class: "muted" }, "Nothing spent today."),
      el("table", {}, el("thead", {}, el("tr", {}, ...["repository", "spent", "refused",
                                                       "daily budget", "used"].map(
        (name) => el("th", { scope: "col" }, name)))), body));
  }

  async function providersSection() {
    const data = await api("/api/providers");
    const columns = data.providers.length ? Object.keys(data.providers[0]) : [];
    const cell = (value) => typeof value === "object" && value !== null
      ? JSON.stringify(value) : String(value);
    return el("section", { "aria-labelledby": "providers-title" },
      el("h2", { id: "providers-title" }, "Providers"),
      el("table", { id: "provider-matrix" },
         el("thead", {}, el("tr", {}, ...columns.map((c) => el("th", { scope: "col" }, c)))),
         el("tbody", {}, ...data.providers.map((row) => el("tr", {},
           ...columns.map((c) => el("td", {}, cell(row[c]))))))));
  }

  Studio.renderOperators = async function renderOperators(view) {
    const status = el("p", { id: "operators-message", class: "message", role: "status" });
    view.replaceChildren(el("h1", {}, "Operators"), status);
    try {
      const sections = [await killSwitchSection(status), await settingsSection(status),
                        await spendSection(), await providersSection()];
      view.append(...sections);
    } catch (error) {
      Studio.message(status, String(error.message || error), true);
    }
  };
})();
