// The learners of a clustered deployment (docs/cluster.md): members and ownership moves.
// Separate from dashboard.js: it adds its own section when GET /cluster says "clustered" (a
// server that is not one of several learners answers {"clustered": false}: nothing is shown).
(function () {
  "use strict";
  const TOKEN_KEY = "svmstream-token";

  function headers() {
    const token = sessionStorage.getItem(TOKEN_KEY);
    return token ? { Authorization: "Bearer " + token } : {};
  }

  function cell(row, text) {
    const td = document.createElement("td");
    td.textContent = text == null ? "–" : String(text);
    row.appendChild(td);
  }

  function section() {
    let el = document.getElementById("cluster");
    if (el) return el;
    el = document.createElement("section");
    el.id = "cluster";
    el.innerHTML =
      '<h2>Learners <small id="cluster-note"></small></h2>' +
      '<table id="cluster-members"><thead><tr><th>member</th><th>URL</th><th>models</th></tr></thead><tbody></tbody></table>' +
      '<h2>Ownership moves</h2>' +
      '<table id="cluster-moves"><thead><tr><th>time</th><th>model</th><th>move</th><th>member</th><th>seconds</th><th>fence</th></tr></thead><tbody></tbody></table>';
    const charts = document.getElementById("charts");
    charts.parentNode.insertBefore(el, charts);
    return el;
  }

  function render(info) {
    section();
    document.getElementById("cluster-note").textContent =
      "this is " + info.member + "; " + Object.keys(info.models).length + " models";
    const members = document.querySelector("#cluster-members tbody");
    members.replaceChildren();
    for (const m of info.members) {
      const row = document.createElement("tr");
      cell(row, m.name);
      cell(row, m.url);
      cell(row, m.models);
      members.appendChild(row);
    }
    const moves = document.querySelector("#cluster-moves tbody");
    moves.replaceChildren();
    for (const mv of info.moves.slice(0, 15)) {
      const row = document.createElement("tr");
      cell(row, new Date(Number(mv.at) * 1000).toLocaleTimeString());
      cell(row, mv.model);
      cell(row, mv.kind);
      cell(row, mv.member);
      cell(row, mv.seconds);
      cell(row, mv.fence);
      moves.appendChild(row);
    }
  }

  async function poll() {
    try {
      const answer = await fetch("cluster", { headers: headers() });
      if (answer.ok) {
        const info = await answer.json();
        if (!info.clustered) return; // not one of several learners: stop polling
        render(info);
      }
    } catch (err) {
      // the server is restarting: try again
    }
    setTimeout(poll, 2000);
  }

  poll();
})();
