// svmstream dashboard: reads GET /events (server-sent events) and draws the figures with uPlot.
// No build step, no dependency but the vendored uPlot (static/vendor/uplot). docs/dashboard.md.
"use strict";

(function () {
  const MAX_POINTS = 300; // 5 minutes at one event per second
  const IDLE_S = 30; // a model with no example for this long is idle: its card is collapsed
  const RETRY_MS = 2000;
  const TOKEN_KEY = "svmstream-token";

  const $ = (sel, root = document) => root.querySelector(sel);
  const el = (tag, attrs = {}, text) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const num = new Intl.NumberFormat("en", { maximumFractionDigits: 1 });
  const fmt = (v, digits) =>
    v === null || v === undefined ? "–" : digits === undefined ? num.format(v) : Number(v).toFixed(digits);
  const pct = (v) => (v === null || v === undefined ? "–" : (100 * v).toFixed(2) + " %");
  const ms = (s) => (s === null || s === undefined ? null : 1000 * s);
  const compact = new Intl.NumberFormat("en", { notation: "compact", maximumFractionDigits: 2 });
  const axisValues = (u, values) => values.map((v) => (v === null ? "" : compact.format(v)));

  // ------------------------------------------------------------------ the charts of one model
  // Each chart: title, series (label, colour, value of an event's model figures[, y scale]).
  const CHARTS = [
    { key: "accuracy", title: "accuracy (%): prequential (test-then-train) and served (feedback)", series: [
      ["prequential", "#1f77b4", (m) => (m.accuracy === null ? null : 100 * m.accuracy)],
      ["served", "#ff7f0e", (m) => (m.served_accuracy === null || m.served_accuracy === undefined
        ? null : 100 * m.served_accuracy)]] },
    // the other tasks' prequential figures (docs/regression.md, docs/novelty.md): empty for a classifier
    { key: "task", title: "regression: prequential MAE and RMSE · novelty: outlier rate (%)", series: [
      ["MAE", "#1f77b4", (m) => (m.prequential_mae === undefined ? null : m.prequential_mae)],
      ["RMSE", "#d62728", (m) => (m.prequential_rmse === undefined ? null : m.prequential_rmse)],
      ["outlier rate (%)", "#ff7f0e", (m) => (m.prequential_outlier_rate === undefined ||
        m.prequential_outlier_rate === null ? null : 100 * m.prequential_outlier_rate)]] },
    { key: "rate", title: "examples / s", series: [["examples/s", "#2ca02c", (m) => m.examples_per_s]] },
    { key: "sv", title: "support vectors and merges", series: [
      ["support vectors", "#9467bd", (m) => m.support_vectors],
      ["merges (right axis)", "#8c564b", (m) => m.merges, "merges"]] },
    { key: "latency", title: "latency (ms, last 10 s)", series: [
      ["learn p50", "#ff7f0e", (m) => ms(m.latency.learn && m.latency.learn.p50)],
      ["learn p99", "#d62728", (m) => ms(m.latency.learn && m.latency.learn.p99)],
      ["predict p50", "#17becf", (m) => ms(m.latency.predict && m.latency.predict.p50)],
      ["predict p99", "#1f3b8c", (m) => ms(m.latency.predict && m.latency.predict.p99)]] },
    { key: "stream", title: "stream lag and dead letters", series: [
      ["lag (entries)", "#e377c2", (m) => (m.stream ? m.stream.lag : null)],
      ["dead letters", "#7f7f7f", (m) => (m.stream ? m.stream.dead_letters : null)]] },
    { key: "drift", title: "drift detections and promotions", series: [
      ["detections", "#bcbd22", (m) => m.drift_detections],
      ["promotions", "#d62728", (m) => (m.promotions === undefined ? null : m.promotions)]] },
  ];

  // the prequential figure of a model's task (accuracy; MAE and RMSE; outlier rate)
  const quality = (m) =>
    m.prequential_rmse !== undefined ? `prequential MAE ${fmt(m.prequential_mae, 3)}, RMSE ${fmt(m.prequential_rmse, 3)}`
    : m.prequential_outlier_rate !== undefined ? `prequential outlier rate ${pct(m.prequential_outlier_rate)}`
    : `prequential accuracy ${pct(m.accuracy)}`;

  const models = new Map(); // name -> {card, data: {key: [xs, ...ys]}, plots: {key: uPlot}}

  // one point (or a span under a minute) made uPlot spread the time axis over years
  // ("2027 2028 2029"): such a span is shown as one minute around the points
  function keepTimeSpan(plot, xs) {
    if (xs.length && xs[xs.length - 1] - xs[0] < 60) {
      const mid = (xs[0] + xs[xs.length - 1]) / 2;
      plot.setScale("x", { min: mid - 30, max: mid + 30 });
    }
  }

  function chartWidth(box) {
    return Math.max(240, box.clientWidth - 8);
  }

  function addModel(name) {
    const card = el("article", { class: "model", "data-model": name, "data-idle": "false" });
    const head = el("h3", { title: "click to show or hide the charts" }, name);
    const kind = el("span", { class: "kind" });
    head.append(kind);
    const figs = el("p", { class: "figures" });
    // the newest promotions (docs/challengers.md): which challenger replaced the champion, on what evidence
    const promos = el("ul", { class: "promotions", "data-model": name, hidden: "" });
    // the race of a no-settings model (docs/defaults.md): candidates, leader, rungs, evidence
    const race = el("div", { class: "race", "data-model": name, hidden: "" });
    card.append(head, figs, race, promos);
    const grid = el("div", { class: "chart-grid" });
    card.append(grid);
    $("#charts").append(card);
    const entry = { card, kind, figs, race, promos, promoKey: "", data: {}, plots: {}, lastActive: null,
      applied: null, open: null };
    head.addEventListener("click", () => {
      entry.open = card.dataset.collapsed === "true"; // the user's choice overrides the idle rule
      setCollapsed(entry, !entry.open);
    });
    for (const spec of CHARTS) {
      const box = el("div", { class: "chart", "data-chart": spec.key, "data-model": name, "data-points": "0" });
      grid.append(box);
      entry.data[spec.key] = [[], ...spec.series.map(() => [])];
      const opts = {
        title: spec.title,
        width: chartWidth(box),
        height: 170,
        // live: false -- the legend names the series (no "--" values when the cursor is elsewhere)
        legend: { show: spec.series.length > 1, live: false },
        scales: { x: { time: true } },
        series: [{}, ...spec.series.map(([label, stroke, , scale]) => ({
          label, stroke, width: 1.5, spanGaps: false, scale: scale || "y" }))],
        axes: [{}, { size: 50, values: axisValues }],
        // for tests and curious users: the time axis' labels as drawn (uPlot draws on a canvas)
        hooks: { draw: [(u) => { box.dataset.xLabels = JSON.stringify((u.axes[0]._values || []).map(String)); }] },
      };
      // a second y scale (merges grow without bound, support vectors stay at most B)
      for (const [, stroke, , scale] of spec.series) {
        if (scale) opts.axes.push({ scale, side: 1, size: 50, stroke, values: axisValues, grid: { show: false } });
      }
      entry.plots[spec.key] = new uPlot(opts, entry.data[spec.key], box);
    }
    models.set(name, entry);
    return entry;
  }

  function setCollapsed(entry, collapsed) {
    entry.card.dataset.collapsed = String(collapsed);
    entry.card.querySelector(".chart-grid").hidden = collapsed;
  }

  function noteActivity(entry, m, t) {
    // active: examples arrived since the last event (or the live rate is above 0)
    if ((entry.applied !== null && m.examples_applied > entry.applied) || m.examples_per_s > 0) entry.lastActive = t;
    entry.applied = m.examples_applied;
    const idle = entry.lastActive === null || t - entry.lastActive > IDLE_S;
    entry.card.dataset.idle = String(idle);
    setCollapsed(entry, entry.open === null ? idle : !entry.open);
  }

  // most recently active first (never active: last), then by name; the table and the cards alike
  const byActivity = (a, b) =>
    (b.lastActive ?? -Infinity) - (a.lastActive ?? -Infinity) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

  function raceText(r) {
    const parts = [`${r.candidates.length} candidates`];
    if (r.leader !== null && r.leader !== undefined) parts.push(`leader ${r.candidates[r.leader].label}`);
    else parts.push("warm-up window open");
    parts.push(`${r.rungs.length} rungs`);
    const ev = r.evidence;
    if (ev && ev.window) {
      const tests = Object.entries(ev.challengers || {}).map(([j, t]) =>
        `${r.candidates[j] ? r.candidates[j].label : j} vs incumbent p = ${fmt(t.p, 3)}`);
      parts.push(`evidence over the last ${fmt(ev.window)} examples` + (tests.length ? `: ${tests.join(", ")}` : ""));
    }
    return "race: " + parts.join(" · ");
  }

  function updateRace(entry, m) {
    const r = m.race;
    entry.race.hidden = !r;
    if (!r) return;
    const squared = m.task === "regression";
    const rows = r.candidates.map((c, i) => {
      const row = el("tr", { "data-candidate": String(i), "data-leader": String(i === r.leader),
        "data-racing": String(c.racing) });
      row.append(
        el("td", {}, (i === r.leader ? "★ " : "") + c.label),
        el("td", {}, c.racing ? "racing" : "dropped"),
        el("td", {}, fmt(c.learned)),
        // a regression race scores squared errors, a classifier's accuracy
        el("td", {}, squared ? fmt(c.recent_mse, 4) : pct(c.recent_accuracy ?? c.segment_accuracy)),
      );
      return row;
    });
    const table = el("table", { class: "race-table" });
    const head = el("tr");
    const score = squared ? "recent prequential squared error" : "recent prequential accuracy";
    for (const h of ["candidate", "state", "learned", score]) head.append(el("th", {}, h));
    table.append(head, ...rows);
    const challengers = m.challengers ? ` · ${fmt(m.challengers)} challengers` : "";
    entry.race.replaceChildren(el("p", { class: "race-summary" }, raceText(r) + challengers), table);
  }

  function removeModel(name) {
    const entry = models.get(name);
    for (const plot of Object.values(entry.plots)) plot.destroy();
    entry.card.remove();
    models.delete(name);
  }

  function updateCharts(entry, m, t) {
    for (const spec of CHARTS) {
      const data = entry.data[spec.key];
      data[0].push(t);
      spec.series.forEach(([, , value], i) => {
        const v = value(m);
        data[i + 1].push(v === undefined ? null : v);
      });
      if (data[0].length > MAX_POINTS) for (const column of data) column.shift();
      entry.plots[spec.key].setData(data);
      keepTimeSpan(entry.plots[spec.key], data[0]);
      // for tests and curious users: how many points the chart has a value for
      const filled = data.slice(1).reduce((n, column) => Math.max(n, column.filter((v) => v !== null).length), 0);
      entry.plots[spec.key].root.parentNode.dataset.points = String(filled);
    }
    entry.kind.textContent = m.kind ? ` — ${m.kind}` : "";
    const streamTitle = entry.plots.stream.root.querySelector(".u-title");
    streamTitle.textContent = "stream lag and dead letters" + (m.stream ? "" : " (no stream)");
    entry.figs.textContent =
      `${m.algorithm}, budget ${fmt(m.budget)} · ${quality(m)} · ` +
      (m.served_accuracy === null || m.served_accuracy === undefined ? "" : `served ${pct(m.served_accuracy)} · `) +
      `${fmt(m.examples_per_s)} examples/s · ${fmt(m.support_vectors)} SVs · ${fmt(m.merges)} merges` +
      (m.warming_up ? " · warming up" : "") +
      (m.challengers || m.promotions ? ` · ${fmt(m.challengers)} challengers · ${fmt(m.promotions)} promotions` : "") +
      (m.stream ? ` · stream lag ${fmt(m.stream.lag)} · dead letters ${fmt(m.stream.dead_letters)}` : "");
  }

  function settingsText(settings) {
    const parts = Object.entries(settings || {}).map(([k, v]) => `${k} = ${JSON.stringify(v)}`);
    return parts.length ? parts.join(", ") : "the champion's settings";
  }

  function promotionText(p) {
    const who = p.manual ? "promoted by hand" : `promoted on evidence (${p.origin || "user"} challenger)`;
    const evidence = p.e_value === null || p.e_value === undefined ? "" :
      ` · e-value ${fmt(p.e_value)} (threshold ${fmt(p.threshold)}), ${fmt(p.wins)} wins / ` +
      `${fmt(p.losses)} losses over ${fmt(p.paired_examples)} pairs`;
    const when = p.time ? ` · ${new Date(p.time * 1000).toLocaleTimeString()}` : "";
    return `example ${fmt(p.at)}: ${settingsText(p.settings)} ${who}${evidence}${when}`;
  }

  function updatePromotions(entry, m) {
    const list = m.recent_promotions || [];
    const key = `${m.promotions}:${list.map((p) => p.at).join(",")}`;
    if (key === entry.promoKey) return;
    entry.promoKey = key;
    entry.promos.hidden = list.length === 0;
    entry.promos.replaceChildren(
      ...list.map((p) => el("li", { "data-at": String(p.at), "data-manual": String(p.manual) }, promotionText(p))),
    );
  }

  // ------------------------------------------------------------------ tables
  function snapshotText(t, now) {
    if (t === null || t === undefined) return "never";
    return `${new Date(t * 1000).toLocaleTimeString()} (${fmt(Math.max(0, now - t), 0)} s ago)`;
  }

  function renderModels(event, ordered) {
    const body = $("#models-table tbody");
    body.replaceChildren(
      ...ordered.map((m) => {
        const row = el("tr", { "data-model": m.name });
        const classes = m.classes.join(", ") + (m.n_classes > m.classes.length ? ` … (${m.n_classes})` : "");
        const cells = [
          m.name, m.algorithm, fmt(m.budget), classes || "–", fmt(m.version), pct(m.accuracy),
          fmt(m.examples_per_s), fmt(m.support_vectors),
          m.challengers ? `${fmt(m.promotions)} (${fmt(m.challengers)} challengers)` : fmt(m.promotions),
          snapshotText(m.last_snapshot_time, event.time),
        ];
        cells.forEach((text, i) => {
          const cell = el("td", {}, text);
          if (i === 6) cell.dataset.figure = "examples_per_s";
          if (i === 5) cell.dataset.figure = "accuracy";
          if (i === 8) cell.dataset.figure = "promotions";
          row.append(cell);
        });
        return row;
      }),
    );
    const totals = event.totals;
    $("#models-note").textContent =
      (totals.models > totals.shown ? `(the first ${totals.shown} of ${totals.models} by name; totals cover all) ` : "") +
      "most recently active first";
    for (const node of document.querySelectorAll("[data-total]")) {
      node.textContent = fmt(totals[node.dataset.total]);
    }
  }

  function renderJobs(jobs) {
    const body = $("#jobs-table tbody");
    body.replaceChildren(
      ...jobs.map((j) => {
        const row = el("tr", { "data-job": j.id });
        const stage = [j.phase, j.stage !== j.phase ? j.stage : null, j.level !== null ? `level ${j.level}` : null]
          .filter(Boolean)
          .join(" · ");
        const bar = el("progress", { max: "1" });
        if (j.fraction !== null) bar.value = j.fraction; // no value: an indeterminate bar
        const progress = el("td");
        progress.append(bar);
        row.append(
          el("td", { title: j.id }, j.id.slice(0, 8)), el("td", {}, j.algorithm), el("td", {}, j.model),
          el("td", { class: `state-${j.state}`, title: j.error || "" }, j.state), el("td", {}, stage),
          progress, el("td", {}, j.elapsed_s === null ? "–" : `${fmt(j.elapsed_s, 1)} s`),
        );
        return row;
      }),
    );
    $("#no-jobs").hidden = jobs.length > 0;
  }

  function onEvent(event) {
    const seen = new Set();
    for (const m of event.models) {
      seen.add(m.name);
      const entry = models.get(m.name) || addModel(m.name);
      updateCharts(entry, m, event.time);
      updatePromotions(entry, m);
      updateRace(entry, m);
      noteActivity(entry, m, event.time);
    }
    for (const name of [...models.keys()]) if (!seen.has(name)) removeModel(name);
    const ordered = event.models
      .map((m) => ({ m, name: m.name, lastActive: models.get(m.name).lastActive }))
      .sort(byActivity);
    const charts = $("#charts");
    ordered.forEach(({ name }, i) => {
      const card = models.get(name).card;
      if (charts.children[i] !== card) charts.insertBefore(card, charts.children[i] || null);
    });
    renderModels(event, ordered.map(({ m }) => m));
    renderJobs(event.jobs);
  }

  // ------------------------------------------------------------------ the stream
  // fetch, not EventSource: EventSource cannot send the Authorization header, and a token in
  // the URL would end up in access logs (docs/dashboard.md).
  function setStatus(state, text) {
    const node = $("#status");
    node.dataset.state = state;
    node.textContent = text;
  }

  function askToken(message) {
    setStatus("auth", "token needed");
    const form = $("#token-form");
    form.hidden = false;
    $("#token-error").textContent = message || "";
    $("#token").focus();
  }

  function dispatch(block) {
    if (block.data.length && block.event === "tick") onEvent(JSON.parse(block.data.join("\n")));
  }

  async function readStream(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    let block = { event: "message", data: [] };
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      // one line at a time; a lone \r at the end of the buffer may be half of \r\n
      for (let m = /\r\n|\r(?!$)|\n/.exec(buf); m; m = /\r\n|\r(?!$)|\n/.exec(buf)) {
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === "") {
          dispatch(block);
          block = { event: "message", data: [] };
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "data") block.data.push(val);
          else if (field === "event") block.event = val;
        }
      }
    }
  }

  async function connect() {
    const headers = { Accept: "text/event-stream" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    let response;
    try {
      response = await fetch("events", { headers, cache: "no-store" });
    } catch (err) {
      setStatus("down", "server unreachable; retrying");
      setTimeout(connect, RETRY_MS);
      return;
    }
    if (response.status === 401) {
      askToken(token ? "That token was refused." : "");
      return;
    }
    if (!response.ok) {
      setStatus("down", `/events answered ${response.status}; retrying`);
      setTimeout(connect, RETRY_MS);
      return;
    }
    $("#token-form").hidden = true;
    setStatus("live", "live");
    try {
      await readStream(response);
    } catch (err) {
      // the connection broke (server restart); fall through to the retry
    }
    setStatus("down", "disconnected; retrying");
    setTimeout(connect, RETRY_MS);
  }

  $("#token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("#token").value.trim());
    setStatus("connecting", "connecting…");
    connect();
  });
  window.addEventListener("resize", () => {
    for (const entry of models.values()) {
      for (const plot of Object.values(entry.plots)) {
        plot.setSize({ width: chartWidth(plot.root.parentNode), height: 170 });
      }
    }
  });
  connect();
})();
