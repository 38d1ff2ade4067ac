// The approvals panel of a run's page: every approval its gated tool calls asked for; a pending
// one with its call (tool and arguments), the rule, when it expires, a reason field and the
// Approve and Deny buttons (run scope); a decided one with who decided, when and why. Everything
// from the API is put in the page as text.
"use strict";

(() => {
  const { el, badge, api } = Studio;

  class ApprovalPanel {
    constructor(executionId, note) {
      this.id = executionId;
      this.note = note;
      this.list = el("div", { id: "approvals-list", class: "approvals" },
                     el("p", { class: "muted" }, "No approvals asked."));
      this.section = el("section", { id: "approvals", "aria-labelledby": "approvals-title" },
                        el("h2", { id: "approvals-title" }, "Approvals"), this.list);
      this.busy = false;
      this.seen = "";
    }

    path(suffix) {
      return "/api/executions/" + encodeURIComponent(this.id) + "/approvals" + (suffix || "");
    }

    async refresh() {
      if (this.busy) return;
      this.busy = true;
      try {
        const found = await api(this.path());
        this.render(found.approvals || []);
      } catch (error) {
        /* the next event or refresh tries again */
      } finally {
        this.busy = false;
      }
    }

    render(approvals) {
      // drawn again only when something changed: a reason being typed is kept
      const seen = JSON.stringify(approvals);
      if (!approvals.length || seen === this.seen) return;
      this.seen = seen;
      this.list.replaceChildren(...approvals.map((approval) => this.item(approval)));
    }

    item(approval) {
      const head = el("p", { class: "approval-head" },
                      badge(approval.status, { class: "badge " + approval.status + " outcome" }),
                      " ", el("code", { class: "tool" }, approval.tool),
                      " (rule ", el("code", {}, approval.rule), ")");
      const args = el("pre", { class: "args-full" }, JSON.stringify(approval.args || {}, null, 2));
      const node = el("div", { class: "approval", "data-approval-id": approval.id,
                               "data-status": approval.status }, head, args);
      if (approval.status !== "pending") {
        node.append(el("p", { class: "decision" },
                       approval.status + " by " + (approval.decided_by || "?") + " at " +
                       Studio.when(approval.decided_at) +
                       (approval.reason ? ": " + approval.reason : "")));
        return node;
      }
      const fieldId = "reason-" + approval.id;
      const reason = el("input", { id: fieldId, type: "text", maxlength: "4000",
                                   class: "approval-reason" });
      const approve = el("button", { type: "button", class: "approve" }, "Approve");
      const deny = el("button", { type: "button", class: "danger deny" }, "Deny");
      approve.addEventListener("click", () => this.decide(approval, "approve", reason));
      deny.addEventListener("click", () => this.decide(approval, "deny", reason));
      node.append(el("p", { class: "muted" }, "expires " + Studio.when(approval.expires_at)),
                  el("label", { for: fieldId }, "Reason "), reason,
                  el("div", { class: "actions" }, approve, deny));
      return node;
    }

    async decide(approval, decision, reason) {
      const body = { decision };
      if (reason.value) body.reason = reason.value;
      try {
        const answer = await api(this.path("/" + encodeURIComponent(approval.id)),
                                 { method: "POST", body });
        Studio.message(this.note, (decision === "approve" ? "Approved" : "Denied") +
                       (answer.resumed ? "; the run resumes." : "."));
      } catch (error) {
        Studio.message(this.note, String(error.message || error), true);
      }
      this.refresh();
    }
  }

  Studio.ApprovalPanel = ApprovalPanel;
})();
