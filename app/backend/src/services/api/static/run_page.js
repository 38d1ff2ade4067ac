// One run's page: status through every phase, the conversation as it happens (model text, tool
// calls with arguments and expandable results), tokens and cost, finalization, the diff, branch,
// commit and PR links, cancel (with confirmation) and the replay-script download.
// The journal is read as SSE with fetch (EventSource cannot send the Authorization header); a
// dropped connection resumes with Last-Event-ID; the stream ends with its `end` event, sent once
// the final status is committed.
"use strict";

(() => {
  const { el, badge, setBadge, link, api, money } = Studio;
  const PREVIEW = 140;
  const RESULT_CHARS = 20000;

  function preview(value) {
    const text = JSON.stringify(value === undefined ? {} : value);
    return text.length <= PREVIEW ? text : text.slice(0, PREVIEW - 1) + "…";
  }

  function repoBase(repoUrl) {
    if (!Studio.safeUrl(repoUrl)) return null;
    return String(repoUrl).replace(/\.git$/, "").replace(/\/$/, "");
  }

  class RunPage {
    constructor(view, executionId) {
      this.id = executionId;
      this.execution = null;
      this.calls = new Map();
      this.ended = false;
      const field = (label, node) => [el("dt", {}, label), el("dd", {}, node)];
      this.status = badge("…", { id: "run-status" });
      this.stream = badge("connecting", { id: "stream-state" });
      this.provider = el("span", { id: "run-provider" });
      this.repo = el("span", { id: "run-repo" });
      this.branch = el("span", { id: "run-branch" });
      this.commit = el("span", { id: "run-commit" });
      this.pr = el("span", { id: "run-pr" });
      this.tokens = el("span", { id: "run-tokens" }, "0 in / 0 out");
      this.cost = el("span", { id: "run-cost" }, money(0));
      this.error = el("span", { id: "run-error" });
      this.note = el("p", { id: "run-message", class: "message", role: "status" });
      this.cancelButton = el("button", { id: "cancel-run", type: "button", class: "danger" },
                             "Cancel run");
      this.downloadButton = el("button", { id: "download-replay", type: "button" },
                               "Download replay script");
      this.conversation = el("div", { id: "conversation", class: "conversation" });
      this.diff = el("div", { id: "diff", class: "diff" },
                     el("p", { class: "muted" }, "Shown once the run has ended."));
      this.prompt = el("pre", { id: "run-prompt" });
      this.approvals = new Studio.ApprovalPanel(executionId, this.note);
      view.replaceChildren(
        el("h1", {}, "Run ", el("code", { id: "run-id" }, executionId)),
        el("section", { "aria-label": "Summary" },
           el("dl", {}, ...field("status", this.status), ...field("stream", this.stream),
              ...field("provider", this.provider), ...field("repository", this.repo),
              ...field("branch", this.branch), ...field("commit", this.commit),
              ...field("pull request", this.pr), ...field("tokens", this.tokens),
              ...field("cost", this.cost), ...field("error", this.error)),
           el("div", { class: "actions" }, this.cancelButton, this.downloadButton), this.note),
        this.approvals.section,
        el("section", { "aria-labelledby": "conversation-title" },
           el("h2", { id: "conversation-title" }, "Conversation"), this.conversation),
        el("section", { "aria-labelledby": "diff-title" },
           el("h2", { id: "diff-title" }, "Diff (base commit to head)"), this.diff),
        el("section", { "aria-labelledby": "prompt-title" },
           el("h2", { id: "prompt-title" }, "Prompt"), this.prompt));
      this.cancelButton.addEventListener("click", () => this.cancel());
      this.downloadButton.addEventListener("click", () => this.download());
    }

    async start() {
      try {
        this.summary(await api("/api/executions/" + encodeURIComponent(this.id)));
      } catch (error) {
        Studio.message(this.note, String(error.message || error), true);
        setBadge(this.stream, "error");
        return;
      }
      const controller = new AbortController();
      Studio.onLeave(() => controller.abort());
      this.follow(controller.signal);
      this.approvals.refresh();
      Studio.every(2000, () => this.refresh());  // queued and claimed have no event of their own
    }

    async refresh() {
      if (this.ended) return;
      try {
        const execution = await api("/api/executions/" + encodeURIComponent(this.id));
        if (!this.ended && !Studio.FINAL.includes(execution.status)) this.summary(execution);
        if (execution.status === "awaiting_approval") this.approvals.refresh();
      } catch (error) {
        /* the stream goes on; the next refresh tries again */
      }
    }

    summary(execution) {
      this.execution = execution;
      if (!this.ended) {
        // held back by the kill switch: queued, resumes where it was once it is released
        setBadge(this.status, execution.paused_reason ? "paused (kill switch)" : execution.status);
      }
      this.provider.textContent = execution.provider + " · " + execution.model;
      this.repo.replaceChildren(execution.repo_url ? link(execution.repo_url)
                                                    : (execution.workspace || ""));
      this.prompt.textContent = execution.prompt;
      this.links(execution);
      if (execution.usage) this.usage(execution.usage);
      this.error.textContent = execution.error_code
        ? execution.error_code + ": " + (execution.error_message || "") : "";
      this.cancelButton.disabled = Studio.FINAL.includes(execution.status);
    }

    links(data) {
      const base = repoBase(this.execution ? this.execution.repo_url : null);
      if (data.branch) {
        this.branch.replaceChildren(base ? link(base + "/tree/" + data.branch, data.branch)
                                         : data.branch);
      }
      if (data.head_sha) {
        this.commit.replaceChildren(base ? link(base + "/commit/" + data.head_sha, data.head_sha)
                                         : data.head_sha);
      }
      if (data.pr_url) this.pr.replaceChildren(link(data.pr_url, data.pr_url, { id: "pr-link" }));
    }

    usage(total) {
      this.tokens.textContent = (total.input_tokens || 0) + " in / " +
        (total.output_tokens || 0) + " out";
      this.cost.textContent = money(total.cost_usd);
    }

    add(node) {
      this.conversation.append(node);
      return node;
    }

    call(callId) {
      let entry = this.calls.get(callId);
      if (!entry) {
        const outcome = badge("pending", { class: "badge pending outcome" });
        const tool = el("code", { class: "tool" });
        const args = el("span", { class: "args" });
        const argsFull = el("pre", { class: "args-full" });
        const result = el("div", { class: "result" });
        const details = el("details", { class: "call", "data-call-id": callId },
                           el("summary", {}, tool, outcome, args),
                           el("h3", {}, "Arguments"), argsFull, el("h3", {}, "Result"), result);
        entry = { details, outcome, tool, args, argsFull, result };
        this.calls.set(callId, entry);
        this.add(details);
      }
      return entry;
    }

    onToolCall(event) {
      const call = event.data.call || {};
      const entry = this.call(String(call.call_id || event.seq));
      entry.tool.textContent = (call.domain || "") + "." + (call.operation || "");
      entry.args.textContent = preview(call.args);
      entry.argsFull.textContent = JSON.stringify(call.args || {}, null, 2);
    }

    onToolResult(event) {
      const envelope = event.data.envelope || {};
      const entry = this.call(String(envelope.call_id || event.seq));
      if (!entry.tool.textContent) {
        entry.tool.textContent = (envelope.domain || "") + "." + (envelope.operation || "");
      }
      const parts = [];
      const result = envelope.result;
      if (!envelope.ok) {
        const error = envelope.error || {};
        setBadge(entry.outcome, "failed");
        entry.outcome.textContent = "error " + (error.code || "");
        entry.details.classList.add("failed");
        parts.push(el("p", { class: "error-code" }, "error " + (error.code || "") + ": " +
                      (error.message || "")));
      } else if (result && typeof result === "object" && "exit_code" in result) {
        const failed = result.exit_code !== 0;
        setBadge(entry.outcome, failed ? "failed" : "ok");
        entry.outcome.textContent = "exit " + result.exit_code + (failed ? " · failed" : "");
        if (failed) entry.details.classList.add("failed");
        parts.push(el("p", { class: "exit-code" }, "exit code " + result.exit_code +
                      (result.timed_out ? " (timed out)" : "")));
        for (const stream of ["stdout", "stderr"]) {
          parts.push(el("h3", {}, stream),
                     el("pre", { class: stream }, String(result[stream] || "").slice(-RESULT_CHARS)));
        }
      } else {
        setBadge(entry.outcome, "ok");
        parts.push(el("pre", { class: "value" },
                      JSON.stringify(result, null, 2).slice(0, RESULT_CHARS)));
      }
      entry.result.replaceChildren(...parts);
    }

    onSetup(data) {
      // a setup command (services.runs.setup_phase): started, its output, its end; text only
      const head = "setup " + (Number(data.index) + 1) + " (" + data.source + ")";
      if (data.status === "started") {
        this.add(el("p", { class: "note setup" }, head + ": $ " + data.command));
      } else if (data.status === "output") {
        this.add(el("pre", { class: "setup-output", "data-stream": data.stream }, data.text));
      } else {
        this.add(el("p", { class: "note setup", "data-status": data.status },
                    head + ": " + data.status + ", exit " + data.exit_code +
                    (data.timed_out ? " (timed out)" : "")));
      }
    }

    onNetwork(data) {
      const blocked = Array.isArray(data.blocked) ? data.blocked : [];
      this.add(el("p", { class: "note network" }, "network (" + data.phase + "): " +
                  data.bytes_to_sandbox + " bytes in, " + blocked.length + " refused"));
      for (const item of blocked) {
        this.add(el("p", { class: "note network blocked" },
                    "refused " + item.method + " " + item.host + ":" + item.port + " (" +
                    item.reason + ") by " + item.command));
      }
    }

    onFinalize(data) {
      if (!this.ended) setBadge(this.status, "finalizing");
      let text;
      if (!data.ok) {
        const error = data.error || {};
        text = data.step + " failed: " + (error.code || "") + ": " + (error.message || "");
      } else if (data.step === "commit") {
        text = "commit: " + (data.committed ? "committed " : "nothing new ") +
          (data.head_sha || "");
      } else if (data.step === "push") {
        text = "push: " + (data.pushed ? "pushed " : "not pushed ") + (data.branch || "") +
          (data.note ? " (" + data.note + ")" : "");
      } else if (data.skipped) {
        text = "pull request: skipped (" + (data.note || "") + ")";
      } else {
        text = "pull request: ";
      }
      const line = this.add(el("p", { class: "note finalize", "data-step": data.step }, text));
      if (data.step === "pull_request" && data.ok && !data.skipped) {
        line.append(link(data.url, data.url));
      }
      this.links({ branch: data.branch, head_sha: data.head_sha, pr_url: data.url });
    }

    onEnd(data) {
      this.ended = true;
      setBadge(this.status, data.status);
      setBadge(this.stream, "ended");
      this.links(data);
      if (data.usage) this.usage(Object.assign({}, data.usage, { cost_usd: data.cost_usd }));
      if (data.error_code) {
        this.error.textContent = data.error_code + ": " + (data.error_message || "");
      }
      this.cancelButton.disabled = true;
      this.loadDiff();
    }

    handle(kind, event) {
      const data = event.data || {};
      if (kind === "started") {
        if (!this.ended) setBadge(this.status, "running");
        this.add(el("p", { class: "note" }, "started " + data.provider + " (" + data.model + ")"));
      } else if (kind === "model_response") {
        if (data.text) this.add(el("div", { class: "msg" }, el("pre", { class: "model-text" },
                                                             data.text)));
      } else if (kind === "tool_call") {
        this.onToolCall(event);
      } else if (kind === "tool_result") {
        this.onToolResult(event);
      } else if (kind === "usage") {
        if (data.total) this.usage(data.total);
      } else if (kind === "warning") {
        this.add(el("p", { class: "note warning" }, "warning: " + (data.message || "")));
      } else if (kind === "model_fallback") {
        const from = data.from || {}, to = data.to || {}, reason = data.reason || {};
        this.add(el("p", { class: "note fallback" },
          "model fallback: " + (from.provider || "") + " (" + (from.model || "") + ") → " +
          (to.provider || "") + " (" + (to.model || "") + ") after " + (reason.code || "") +
          (reason.message ? ": " + reason.message : "")));
      } else if (kind === "finished") {
        const result = data.result || {};
        this.add(el("p", { class: "note" }, data.outcome === "killswitch_engaged"
          ? "paused by the kill switch: resumes where it was once it is released"
          : "agent loop finished: " + data.outcome));
        if (result.summary) this.add(el("pre", { class: "summary" }, result.summary));
      } else if (kind === "approval_requested" || kind === "approval_decided") {
        const call = data.call || {};
        const tool = data.tool || (call.domain || "") + "." + (call.operation || "");
        this.add(el("p", { class: "note approval-event" }, kind === "approval_requested"
          ? "waiting for approval of " + tool + " (rule " + (data.rule || "") + ")"
          : "approval " + (data.decision || "") + " of " + tool + " by " +
            (data.decided_by || "") + (data.reason ? ": " + data.reason : "")));
        this.approvals.refresh();
      } else if (kind === "finalize") {
        this.onFinalize(data);
      } else if (kind === "setup") {
        this.onSetup(data);
      } else if (kind === "network") {
        this.onNetwork(data);
      } else if (kind === "end") {
        this.onEnd(data);
      }
    }

    dispatch(block, cursor) {
      let kind = "message";
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "event") kind = value;
        else if (name === "data") data += (data ? "\n" : "") + value;
        else if (name === "id") cursor.lastId = value;
      }
      if (!data) return false;
      this.handle(kind, JSON.parse(data));
      return kind === "end";
    }

    async read(cursor, signal) {
      const extra = { Accept: "text/event-stream" };
      if (cursor.lastId) extra["Last-Event-ID"] = cursor.lastId;
      const response = await fetch("/api/executions/" + encodeURIComponent(this.id) + "/events",
                                   { headers: Studio.headers(extra), signal });
      if (!response.ok) throw new Error("the stream answered " + response.status);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          if (this.dispatch(block, cursor)) return true;
        }
      }
    }

    async follow(signal) {
      const cursor = { lastId: null };
      setBadge(this.stream, "live");
      while (!signal.aborted) {
        try {
          if (await this.read(cursor, signal)) return;
        } catch (error) {
          if (signal.aborted) return;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));  // then resume after lastId
      }
    }

    async loadDiff() {
      try {
        const diff = await api("/api/executions/" + encodeURIComponent(this.id) + "/diff");
        if (!diff.available || !diff.patch) {
          this.diff.replaceChildren(el("p", { class: "muted" }, "No changes recorded."));
          return;
        }
        const lines = diff.patch.split("\n").map((line) => {
          let cls = "";
          if (line.startsWith("diff --git")) cls = "file";
          else if (line.startsWith("+++") || line.startsWith("---")) cls = "file";
          else if (line.startsWith("@@")) cls = "hunk";
          else if (line.startsWith("+")) cls = "add";
          else if (line.startsWith("-")) cls = "del";
          return el("span", { class: cls }, line || " ");
        });
        this.diff.replaceChildren(
          el("p", { class: "muted" }, "from " + (diff.base_commit || "?") + " to " +
             (diff.head_sha || "the workspace")),
          el("pre", { id: "diff-text" }, ...lines));
      } catch (error) {
        this.diff.replaceChildren(el("p", { class: "message error" },
                                     String(error.message || error)));
      }
    }

    async cancel() {
      const sure = await Studio.confirmAction(
        "Cancel this run?", "The run stops before its next model or tool call.", "Cancel run");
      if (!sure) return;
      try {
        await api("/api/executions/" + encodeURIComponent(this.id) + "/cancel",
                  { method: "POST" });
        Studio.message(this.note, "Cancellation requested.");
      } catch (error) {
        Studio.message(this.note, String(error.message || error), true);
      }
    }

    async download() {
      try {
        const response = await fetch(
          "/api/executions/" + encodeURIComponent(this.id) + "/replay-script",
          { headers: Studio.headers() });
        if (!response.ok) throw new Error("the download answered " + response.status);
        const url = URL.createObjectURL(await response.blob());
        const anchor = el("a", { href: url, download: "replay-" + this.id + ".json" });
        document.body.append(anchor);
        anchor.click();
        anchor.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
        Studio.message(this.note, "Replay script downloaded: studio run --provider replay " +
                       "--script replay-" + this.id + ".json");
      } catch (error) {
        Studio.message(this.note, String(error.message || error), true);
      }
    }
  }

  Studio.renderRun = function renderRun(view, executionId) {
    new RunPage(view, executionId).start();
  };
})();
