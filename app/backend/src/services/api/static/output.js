// A command's output as the pages show it: the last part of what was recorded, starting at a
// line boundary, with a notice saying where it was cut and how much (the command's own cap, and
// the page's), a search over the whole recorded output, and its download (the raw route, same
// token). Everything is text.
"use strict";

(() => {
  const { el } = Studio;
  const SHOWN_CHARS = 20000;
  const MAX_MATCHES = 200;
  const number = (value) => Number(value || 0).toLocaleString("en-US");

  // The tail of `text` of at most `limit` characters, cut at the first line start inside it.
  function tail(text, limit) {
    if (text.length <= limit) return { shown: text, hidden: 0 };
    let start = text.length - limit;
    const newline = text.indexOf("\n", start - 1);
    if (newline >= 0 && newline < text.length - 1) start = newline + 1;
    return { shown: text.slice(start), hidden: start };
  }

  function searchBox(text, stream, label) {
    const id = "search-" + label;
    const input = el("input", { id, type: "search", class: "output-search",
                                "data-stream": stream });
    const found = el("ol", { class: "matches", "aria-live": "polite" });
    const summary = el("p", { class: "muted match-count" });
    input.addEventListener("input", () => {
      const query = input.value;
      found.replaceChildren();
      if (!query) { summary.textContent = ""; return; }
      const lines = text.split("\n");
      let count = 0;
      for (let index = 0; index < lines.length && count < MAX_MATCHES; index += 1) {
        if (!lines[index].includes(query)) continue;
        count += 1;
        found.append(el("li", { value: String(index + 1) }, el("code", {}, lines[index])));
      }
      summary.textContent = count ? count + (count >= MAX_MATCHES ? "+" : "") +
        " matching lines (line numbers of the recorded output)" : "no match";
    });
    return el("div", { class: "output-search-box" },
              el("label", { for: id }, "Search the recorded " + stream + " "), input,
              summary, found);
  }

  async function download(path, name, note) {
    try {
      const response = await fetch(path, { headers: Studio.headers() });
      if (!response.ok) throw new Error("the download answered " + response.status);
      const url = URL.createObjectURL(await response.blob());
      const anchor = el("a", { href: url, download: name });
      document.body.append(anchor);
      anchor.click();
      anchor.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (error) {
      if (note) Studio.message(note, String(error.message || error), true);
    }
  }

  // `result`: a command's result (stdout, stderr, truncated, output_bytes); `source`: the query
  // of the raw route ({execution, call}); `label`: unique in the page (ids).
  function commandOutput(result, source, label, note) {
    const parts = [];
    const bytes = result.output_bytes || {};
    for (const stream of ["stdout", "stderr"]) {
      const text = String(result[stream] || "");
      const { shown, hidden } = tail(text, SHOWN_CHARS);
      parts.push(el("h3", {}, stream));
      const recorded = new TextEncoder().encode(text).length;
      const printed = Number(bytes[stream] || 0);
      const notices = [];
      if (result.truncated && printed > 0 && printed > recorded) {
        notices.push("The command printed " + number(printed) + " bytes to " + stream +
                     "; the middle was not recorded (the first and last parts were: " +
                     number(recorded) + " bytes).");
      }
      if (hidden) {
        notices.push("Showing the last " + number(shown.length) + " of " +
                     number(text.length) + " recorded characters, from the start of a line.");
      }
      if (notices.length) parts.push(el("p", { class: "cut", "data-stream": stream },
                                        notices.join(" ")));
      // focusable: a long output scrolls, and is read with the keyboard too
      parts.push(el("pre", { class: stream, tabindex: "0" },
                    shown));
      if (notices.length) {
        const query = "stream=" + stream + (source.call ? "&call_id=" +
                                             encodeURIComponent(source.call) : "");
        const path = "/api/executions/" + encodeURIComponent(source.execution) + "/output?" +
          query;
        const button = el("button", { type: "button", class: "download-output",
                                      "data-stream": stream },
                          "Download the whole recorded " + stream);
        button.addEventListener("click", () => download(
          path, stream + "-" + source.execution + ".txt", note));
        parts.push(el("div", { class: "actions" }, button), searchBox(text, stream, label +
                                                                     "-" + stream));
      }
    }
    return parts;
  }

  Studio.commandOutput = commandOutput;
  Studio.downloadWithToken = download;
})();
