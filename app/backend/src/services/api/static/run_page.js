// One run's page: status through every phase, the conversation as it happens (model text, tool
// calls with arguments and expandable results), tokens and cost, finalization, the diff, branch,
// commit and PR links, cancel (with confirmation) and the replay-script download.
// The journal is read as SSE with fetch (EventSource cannot send the Authorization header); a
// dropped connection resumes with Last-Event-ID; the stream ends with its `end` event, sent once
// the final status is committed. A stream or refresh that fails shows "reconnecting" with the
// last time the page heard from the server; a run that cannot be read is said once, at the top.
"use strict";

(() => {
  const { el, badge, setBadge, link, api, money } = Studio;
  const PREVIEW = 140;
  const RESULT_CHARS = 20000;  // a non-command result's JSON
  const WEB_HOSTS = ["github.com"];

  function preview(value) {
    const text = JSON.stringify(value === undefined ? {} : value);
    return text.length <= PREVIEW ? text : text.slice(0, PREVIEW - 1) + "…";
  }

  // The repository's web address when it has one the page knows of (github.com, or the host
  // of the run's pull request): a git endpoint, a local path or another host is not a page.
  // The workspace's own disk use when provisioned (services.repos.disk_use), as text:
  // "39.3 MB (checkout 39.0 MB), history borrowed from the mirror"; "" before it is measured.
  function diskText(disk) {
    if (!disk || typeof disk !== "object") return "";
    const mb = (bytes) => (Number(bytes || 0) / 1e6).toFixed(1) + " MB";
    return mb(disk.own_bytes) + " (checkout " + mb(disk.checkout_bytes) + "), history " +
      (disk.borrows_mirror ? "borrowed from the mirror" : "held in the workspace");
  }

  function repoBase(repoUrl, prUrl) {
    const safe = Studio.safeUrl(repoUrl);
    if (!safe) return null;
    const host = new URL(safe).host;
    const prHost = Studio.safeUrl(prUrl) ? new URL(prUrl).host : null;
    if (!WEB_HOSTS.includes(host) && host !== prHost) return null;
    return String(repoUrl).replace(/\.git$/, "").replace(/\/$/, "");
  }

  // The final answer when a model's text is one ({"status", "summary", ...} as JSON).
  function answerOf(text) {
    try {
      const parsed = JSON.parse(text);
      return parsed && typeof parsed === "object" && !Array.isArray(parsed) &&
        ("summary" in parsed || "status" in parsed) ? parsed : null;
    } catch (error) {
      return null;
    }
  }

  // Splits a patch into files: {name, lines, added, deleted}.
  function patchFiles(patch) {
    const files = [];
    let current = null;
    for (const line of patch.split("\n")) {
      if (line.startsWith("diff --git ")) {
        const match = line.match(/^diff --git a\/(.*) b\/(.*)$/);
        current = { name: match ? match[2] : line.slice(11), lines: [], added: 0, deleted: 0 };
        files.push(current);
      }
      if (!current) {
        current = { name: "(patch)", lines: [], added: 0, deleted: 0 };
        files.push(current);
      }
      if (line.startsWith("+") && !line.startsWith("+++")) current.added += 1;
      if (line.startsWith("-") && !line.startsWith("---")) current.deleted += 1;
      current.lines.push(line);
    }
    return files.filter((file) => file.lines.some((line) => line !== ""));
  }

  // One file's lines with their old and new line numbers (from each hunk's header).
  function fileLines(lines) {
    let oldLine = 0;
    let newLine = 0;
    return lines.map((line) => {
      let cls = "";
      let numbers = ["", ""];
      const hunk = line.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)/);
      if (line.startsWith("diff --git") || line.startsWith("+++") || line.startsWith("---") ||
          line.startsWith("index ") || line.startsWith("new file") ||
          line.startsWith("deleted file")) {
        cls = "file";
      } else if (hunk) {
        cls = "hunk";
        oldLine = Number(hunk[1]);
        newLine = Number(hunk[2]);
      } else if (line.startsWith("+")) {
        cls = "add";
        numbers = ["", String(newLine++)];
      } else if (line.startsWith("-")) {
        cls = "del";
        numbers = [String(oldLine++), ""];
      } else if (oldLine || newLine) {
        numbers = [String(oldLine++), String(newLine++)];
      }
      return el("span", { class: cls },
                el("span", { class: "ln", "aria-hidden": "true" }, numbers[0]),
                el("span", { class: "ln", "aria-hidden": "true" }, numbers[1]),
                el("span", { class: "code" }, line || " "));
    });
  }

  class RunPage {
    constructor(view, executionId) {
      this.view = view;
      this.id = executionId;
      this.execution = null;
      this.calls = new Map();
      this.ended = false;
      this.pushed = false;
      this.lastHeard = null;
      this.lastEventAt = null;
      this.lastModelText = "";
      this.steps = [];
      const field = (label, node) => [el("dt", {}, label), el("dd", {}, node)];
      this.status = badge("…", { id: "run-status" });
      this.stream = badge("connecting", { id: "stream-state" });
      this.provider = el("span", { id: "run-provider" });
      this.repo = el("span", { id: "run-repo" });
      this.branch = el("span", { id: "run-branch" });
      this.commit = el("span", { id: "run-commit" });
      this.pr = el("span", { id: "run-pr" });
      this.tokens = el("span", { id: "run-tokens" }, "0 in (0 cached) / 0 out");
      this.cost = el("span", { id: "run-cost" }, money(0));
      this.disk = el("span", { id: "run-disk" });
      this.error = el("span", { id: "run-error" });
      this.created = el("span", { id: "run-created" });
      this.started = el("span", { id: "run-started" });
      this.finished = el("span", { id: "run-finished" });
      this.elapsed = el("span", { id: "run-duration" });
      this.heard = el("span", { id: "stream-heard", class: "muted" });
      this.timeline = el("ol", { id: "timeline", class: "timeline" });
      this.note = el("p", { id: "run-message", class: "message", role: "status" });
      this.cancelButton = el("button", { id: "cancel-run", type: "button", class: "danger" },
                             "Cancel run");
      this.downloadButton = el("button", { id: "download-replay", type: "button" },
                               "Download replay script");
      this.conversation = el("div", { id: "conversation", class: "conversation" });
      this.diff = el("div", { id: "diff", class: "diff" },
                     el("p", { class: "muted" }, "Shown once the run has ended."));
      this.prompt = el("pre", { id: "run-prompt" });
      this.review = el("section", { id: "review", "aria-labelledby": "review-title" });
      this.review.hidden = true;
      this.approvals = new Studio.ApprovalPanel(executionId, this.note);
      view.replaceChildren(el("h1", {}, "Run ", el("code", {}, executionId)),
                           el("p", { class: "muted" }, "Loading…"));
      this.layout = () => view.replaceChildren(
        el("h1", {}, "Run ", el("code", { id: "run-id" }, executionId)),
        el("section", { "aria-label": "Summary" },
           el("dl", {}, ...field("status", this.status), ...field("error", this.error),
              ...field("stream", el("span", {}, this.stream, " ", this.heard)),
              ...field("provider", this.provider), ...field("repository", this.repo),
              ...field("branch", this.branch), ...field("commit", this.commit),
              ...field("pull request", this.pr), ...field("created", this.created),
              ...field("started", this.started), ...field("ended", this.finished),
              ...field("duration", this.elapsed), ...field("tokens", this.tokens),
              ...field("cost", this.cost), ...field("workspace disk", this.disk)),
           el("div", { class: "actions" }, this.cancelButton, this.downloadButton), this.note),
        this.approvals.section,
        this.review,
        el("section", { "aria-labelledby": "conversation-title" },
           el("h2", { id: "conversation-title" }, "Conversation"), this.conversation),
        el("section", { "aria-labelledby": "timeline-title" },
           el("h2", { id: "timeline-title" }, "Timeline"), this.timeline),
        el("section", { "aria-labelledby": "diff-title" },
           el("h2", { id: "diff-title" }, "Diff (base commit to head)"), this.diff),
        el("section", { "aria-labelledby": "prompt-title" },
           el("h2", { id: "prompt-title" }, "Prompt"), this.prompt));
      this.cancelButton.addEventListener("click", () => this.cancel());
      this.downloadButton.addEventListener("click", () => this.download());
    }

    async start() {
      const shown = Studio.current();
      let execution;
      try {
        execution = await api("/api/executions/" + encodeURIComponent(this.id));
      } catch (error) {
        if (shown()) Studio.problem(this.view, "Run not found", error);  // no layout, no $0
        return;
      }
      if (!shown()) return;
      this.layout();
      this.heardNow();
      this.summary(execution);
      const controller = new AbortController();
      Studio.onLeave(() => controller.abort());
      this.follow(controller.signal);
      this.approvals.refresh();
      Studio.every(2000, () => this.refresh());  // queued and claimed have no event of their own
      Studio.every(1000, () => this.tick());
    }

    heardNow() {
      this.lastHeard = Date.now();
      this.connected(true);
    }

    // "reconnecting" (and since when the page heard nothing) or back to live.
    connected(ok) {
      if (this.ended) return;
      if (ok) {
        if (this.stream.textContent === "reconnecting") setBadge(this.stream, "live");
        this.heard.textContent = "";
        return;
      }
      setBadge(this.stream, "reconnecting");
      this.tick();
    }

    tick() {
      if (!this.ended && this.execution) this.times(this.execution);
      if (this.stream.textContent !== "reconnecting" || this.lastHeard === null) return;
      const ago = Math.round((Date.now() - this.lastHeard) / 1000);
      this.heard.textContent = "last heard from the server at " +
        new Date(this.lastHeard).toISOString().slice(11, 19) + " UTC (" + ago + " s ago); " +
        "the status shown may be out of date";
    }

    async refresh() {
      if (this.ended) return;
      try {
        const execution = await api("/api/executions/" + encodeURIComponent(this.id));
        this.heardNow();
        if (!this.ended && !Studio.FINAL.includes(execution.status)) this.summary(execution);
        if (execution.status === "awaiting_approval") this.approvals.refresh();
      } catch (error) {
        if (!(error instanceof Studio.ApiError)) this.connected(false);  // no answer at all
      }
    }

    times(execution) {
      this.created.textContent = Studio.when(execution.created_at);
      this.started.textContent = Studio.when(execution.started_at);
      this.finished.textContent = Studio.when(execution.finished_at);
      this.elapsed.textContent = Studio.between(execution.started_at, execution.finished_at);
    }

    // The reason a run did not succeed, in the error row at the top.
    reason(execution) {
      if (execution.error_code) {
        return execution.error_code + ": " + (execution.error_message || "");
      }
      if (!Studio.FINAL.includes(execution.status) || execution.status === "succeeded") return "";
      const result = execution.result && typeof execution.result === "object"
        ? execution.result : {};
      const said = result.summary || result.stderr || "";
      return (execution.outcome || execution.status) + (result.status ? " (" + result.status +
        ")" : "") + (said ? ": " + String(said).slice(0, 2000) : "");
    }

    // A command node's execution has no conversation: its output is its result.
    commandResult(execution) {
      if (execution.provider !== "command" || this.commandShown) return;
      const result = execution.result;
      if (!result || typeof result !== "object" || !("exit_code" in result)) return;
      this.commandShown = true;
      this.add(el("div", { id: "command-output", class: "command-output" },
        el("p", { class: "exit-code" }, "command exit code " + result.exit_code +
           (result.timed_out ? " (timed out)" : "") + (result.duration_ms !== undefined
             ? " · " + Studio.duration(Number(result.duration_ms)) : "")),
        ...Studio.commandOutput(result, { execution: this.id }, "node", this.note)));
    }

    summary(execution) {
      this.execution = execution;
      if (!this.ended) {
        // held back by the kill switch: queued, resumes where it was once it is released
        setBadge(this.status, execution.paused_reason ? "paused (kill switch)" : execution.status);
      }
      this.provider.textContent = execution.provider +
        (execution.model ? " · " + execution.model : "");
      const base = repoBase(execution.repo_url, execution.pr_url);
      this.repo.replaceChildren(base ? link(base, execution.repo_url)
                                     : (execution.repo_url || execution.workspace || ""));
      this.prompt.textContent = execution.prompt;
      this.disk.textContent = diskText(execution.workspace_disk);
      this.links(execution);
      if (execution.usage) this.usage(execution.usage);
      this.error.textContent = this.reason(execution);
      this.times(execution);
      this.cancelButton.disabled = Studio.FINAL.includes(execution.status);
      if (Studio.FINAL.includes(execution.status)) this.commandResult(execution);
    }

    // Branch and commit link to the repository's web pages only once they were pushed there;
    // otherwise (never pushed, no web address) they are text.
    links(data) {
      const execution = this.execution || {};
      if (data.pr_url) this.pushed = true;
      const base = this.pushed ? repoBase(execution.repo_url, data.pr_url || execution.pr_url)
                               : null;
      const branch = data.branch || execution.branch;
      const head = data.head_sha || execution.head_sha;
      if (branch) {
        this.branch.replaceChildren(base ? link(base + "/tree/" + branch, branch) : branch);
      }
      if (head) {
        this.commit.replaceChildren(base ? link(base + "/commit/" + head, head) : head);
      }
      if (data.pr_url) this.pr.replaceChildren(link(data.pr_url, data.pr_url, { id: "pr-link" }));
    }

    // A step of the timeline: a model call or a tool call, from its start to its end.
    step(kind, label, start, end) {
      const from = Studio.time(start);
      const to = Studio.time(end);
      if (from === null || to === null) return "";
      this.steps.push({ kind, label, from, to });
      const first = Math.min(...this.steps.map((s) => s.from));
      const last = Math.max(...this.steps.map((s) => s.to));
      const span = Math.max(last - first, 1);
      this.timeline.replaceChildren(...this.steps.map((item) => {
        const bar = el("span", { class: "bar", "aria-hidden": "true" });
        bar.style.marginLeft = Math.round(100 * (item.from - first) / span) + "%";  // CSSOM
        bar.style.width = Math.max(1, Math.round(100 * (item.to - item.from) / span)) + "%";
        return el("li", { class: "step " + item.kind, "data-kind": item.kind },
                  el("span", {}, item.label), el("span", {}, bar),
                  el("span", { class: "duration" }, Studio.duration(item.to - item.from)));
      }));
      return Studio.duration(to - from);
    }

    usage(total) {
      this.tokens.textContent = (total.input_tokens || 0) + " in (" +
        (total.cached_input_tokens || 0) + " cached) / " + (total.output_tokens || 0) + " out";
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
        const took = el("span", { class: "duration" });
        const tool = el("code", { class: "tool" });
        const args = el("span", { class: "args" });
        const argsFull = el("pre", { class: "args-full" });
        const result = el("div", { class: "result" });
        const details = el("details", { class: "call", "data-call-id": callId },
                           el("summary", {}, tool, outcome, took, args),
                           el("h3", {}, "Arguments"), argsFull, el("h3", {}, "Result"), result);
        entry = { details, outcome, tool, args, argsFull, result, took, startedAt: null };
        this.calls.set(callId, entry);
        this.add(details);
      }
      return entry;
    }

    onToolCall(event) {
      const call = event.data.call || {};
      const entry = this.call(String(call.call_id || event.seq));
      entry.startedAt = event.created_at || null;
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
      const took = this.step("tool", entry.tool.textContent, entry.startedAt, event.created_at);
      entry.took.textContent = took ? "· " + took : "";
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
        parts.push(...Studio.commandOutput(result, { execution: this.id,
                                                     call: envelope.call_id || null },
                                           "call-" + this.calls.size, this.note));
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
      if (data.step === "push" && data.ok && data.pushed) this.pushed = true;
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
      this.heard.textContent = "";
      this.loadDiff();
      this.loadFinal();
      this.loadReview();
    }

    // A review execution's review: verdict, summary, findings by file, links to the posted
    // comments, and the calls its read-only policy refused (what an injection tried).
    async loadReview() {
      let review;
      try {
        review = await api("/api/executions/" + encodeURIComponent(this.id) + "/review");
      } catch (error) {
        return;
      }
      if (!review.available && review.denials.length === 0) return;
      const parts = [el("h2", { id: "review-title" }, "Review")];
      if (review.available) {
        parts.push(
          el("p", {}, "verdict ", el("strong", { id: "review-verdict" }, review.verdict), " · ",
             link(review.url, "posted review")),
          el("pre", { id: "review-summary" }, review.summary || ""),
          ...Object.entries(review.findings_by_file).map(([path, findings]) =>
            el("details", { class: "review-file", open: true, "data-file": path },
               el("summary", {}, el("code", {}, path)),
               el("ul", {}, ...findings.map((f) => el("li", {}, "line " + f.line + " (" +
                  f.severity + ") ", el("strong", {}, f.title), ": " + f.body))))),
          el("ul", { id: "review-comments" }, ...review.comments.map((c) =>
            el("li", {}, c.action + " ", link(c.url, c.path + ":" + c.line)))));
      }
      if (review.denials.length) {
        parts.push(el("h3", {}, "Refused calls (permission denials)"),
                   el("ul", { id: "review-denials" }, ...review.denials.map((d) =>
                     el("li", {}, el("code", {}, d.tool_name), " " + d.code))));
      }
      this.review.replaceChildren(...parts);
      this.review.hidden = false;
    }

    async loadFinal() {
      try {
        const execution = await api("/api/executions/" + encodeURIComponent(this.id));
        this.execution = execution;
        this.summary(execution);
        setBadge(this.status, execution.status);
      } catch (error) {
        /* the end event's fields stay shown */
      }
    }

    // The final answer: its status, summary and changes, once.
    answer(result) {
      if (!result || typeof result !== "object") return;
      const summary = result.summary === undefined ? "" : String(result.summary);
      const changes = Array.isArray(result.changes) ? result.changes : [];
      if (!summary && !changes.length) return;
      const node = el("div", { class: "answer", id: "run-answer" },
                      el("h3", {}, "Answer", result.status ? " (" + result.status + ")" : ""));
      node.append(el("pre", { class: "summary" }, summary));
      // a plain-text answer was shown as the model's text: shown once, here
      const shown = [...this.conversation.querySelectorAll(".model-text")].pop();
      if (summary && shown && shown.textContent.trim() === summary.trim()) {
        shown.remove();
      }
      if (changes.length) {
        node.append(el("ul", { class: "changes" }, ...changes.map((c) => el("li", {},
          typeof c === "string" ? c : JSON.stringify(c)))));
      }
      this.add(node);
    }

    handle(kind, event) {
      const data = event.data || {};
      const previous = this.lastEventAt;
      if (event.created_at) this.lastEventAt = event.created_at;
      if (kind === "started") {
        if (!this.ended) setBadge(this.status, "running");
        this.add(el("p", { class: "note" }, "started " + data.provider + " (" + data.model + ")"));
      } else if (kind === "model_response") {
        const took = this.step("model", "model call", previous, event.created_at);
        const calls = Array.isArray(data.tool_calls) ? data.tool_calls.length : 0;
        const answer = !calls && data.text ? answerOf(data.text) : null;
        this.lastModelText = String(data.text || "").trim();
        const head = el("p", { class: "note model-call" }, "model call" +
                        (took ? " · " + took : "") + (calls ? " · " + calls + " tool call" +
                        (calls > 1 ? "s" : "") : ""));
        if (answer) {
          this.add(head);  // the answer is shown once, by the finished event
        } else if (data.text) {
          this.add(el("div", { class: "msg" }, head, el("pre", { class: "model-text" },
                                                         data.text)));
        } else {
          this.add(head);
        }
      } else if (kind === "tool_call") {
        this.onToolCall(event);
      } else if (kind === "tool_result") {
        this.onToolResult(event);
      } else if (kind === "usage") {
        if (data.total) this.usage(data.total);
      } else if (kind === "warning") {
        this.add(el("p", { class: "note warning" }, "warning: " + (data.message || "")));
      } else if (kind === "compaction") {
        this.add(el("p", { class: "note compaction" }, data.source === "claude_code"
          ? "context compacted by Claude Code (" + (data.trigger || "auto") + ", " +
            (data.before_tokens || "?") + " tokens before)"
          : "context compacted: " + (data.before_tokens || 0) + " → " +
            (data.after_tokens || 0) + " tokens of a " + (data.window || 0) + "-token window" +
            ((data.elided || []).length ? ", " + data.elided.length + " old outputs summarized" : "") +
            (data.summary ? ", " + (data.replaced || 0) + " messages replaced by a summary" : "")));
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
        this.answer(result);
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
      this.heardNow();
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return false;
        this.heardNow();
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
        this.connected(false);  // closed without its end, or no answer: try again
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
        const files = patchFiles(diff.patch);
        const list = el("ul", { id: "diff-files", class: "diff-files" }, ...files.map((file) =>
          el("li", {}, el("code", {}, file.name),
             el("span", { class: "plus" }, "+" + file.added),
             el("span", { class: "minus" }, "−" + file.deleted))));
        this.diff.replaceChildren(
          el("p", { class: "muted" }, files.length + " file" + (files.length === 1 ? "" : "s") +
             " changed, from " + (diff.base_commit || "?") + " to " +
             (diff.head_sha || "the workspace")),
          list,
          ...files.map((file) => el("details", { class: "file-diff", open: true,
                                                 "data-file": file.name },
            el("summary", {}, el("code", {}, file.name), " ",
               el("span", { class: "plus" }, "+" + file.added), " ",
               el("span", { class: "minus" }, "−" + file.deleted)),
            el("pre", { class: "diff-text" }, ...fileLines(file.lines)))));
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
