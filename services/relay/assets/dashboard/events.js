// The event log, live: follows /dashboard/events/stream from the place the page ends and adds
// each entry at the top. Every value is set as text (textContent), never as HTML. Without
// JavaScript the page still shows the newest entries and a reload link.
"use strict";
(function () {
  const table = document.getElementById("events");
  const status = document.getElementById("live");
  if (!table || !status || !window.EventSource) return;
  const body = table.tBodies[0];
  const keep = 200;
  const say = (text, state) => {
    status.textContent = text;
    status.dataset.state = state;
  };
  const add = (cells, seq) => {
    const tr = document.createElement("tr");
    if (seq) tr.dataset.seq = seq;
    cells.forEach((cell, i) => {
      const td = document.createElement("td");
      if (i === 0) {
        const time = document.createElement("time");
        time.dateTime = cell.iso;
        time.textContent = cell.text;
        td.appendChild(time);
      } else if (i === 2) {
        const badge = document.createElement("span");
        badge.className = "state " + cell.replace(/[^a-z_]/g, "");
        badge.textContent = cell;
        td.appendChild(badge);
      } else {
        td.textContent = cell;
        if (i === 4) td.className = "what";
      }
      tr.appendChild(td);
    });
    body.insertBefore(tr, body.firstChild);
    while (body.rows.length > keep) body.deleteRow(body.rows.length - 1);
    const empty = document.getElementById("empty");
    if (empty) empty.remove();
  };
  const now = () => {
    const iso = new Date().toISOString();
    return { iso: iso, text: iso.slice(11, 19) };
  };
  const source = new EventSource(
    "/dashboard/events/stream?after=" + encodeURIComponent(table.dataset.after || "0")
  );
  source.onopen = () => say("Live.", "live");
  source.onerror = () => say("Reconnecting…", "reconnecting");
  source.addEventListener("row", (e) => {
    const r = JSON.parse(e.data);
    add([{ iso: r.at_iso, text: r.at_time }, r.kind, r.state, r.who, r.what], String(r.seq));
    say("Live.", "live");
  });
  source.addEventListener("missed", (e) => {
    add([now(), "missed", "failed", e.data + " events no longer kept", "the log keeps its newest entries; the Asks page has every message"]);
  });
  const reload = () => {
    source.close();
    window.location.reload();
  };
  source.addEventListener("reset", reload);
  source.addEventListener("ended", reload);
})();
