// The console's only script. Pages work without it; it asks before a form that destroys
// something (data-confirm), refreshes a group's page every 5 s when asked to, and runs the
// message browser's live tail (an EventSource on /topics/NAME/live, see console/live.py).
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

function autoRefresh(box) {
  const key = "odradek-console-refresh";
  box.checked = sessionStorage.getItem(key) === "1";
  let timer = null;
  const arm = () => {
    clearTimeout(timer);
    if (box.checked) {
      timer = setTimeout(() => window.location.reload(), 5000);
    }
  };
  box.addEventListener("change", () => {
    sessionStorage.setItem(key, box.checked ? "1" : "0");
    arm();
  });
  arm();
}

// A key, value or header value as the server's template shows it (payload.Shown).
function shown(value) {
  const out = document.createDocumentFragment();
  const pre = document.createElement("pre");
  pre.className = value.kind;
  pre.textContent = value.text;
  out.append(pre);
  if (value.truncated) {
    const note = document.createElement("span");
    note.className = "note";
    note.textContent = `first ${value.text.length} of ${value.size} bytes`;
    out.append(note);
  }
  return out;
}

function recordRow(record) {
  const row = document.createElement("tr");
  row.className = "live";
  const cell = (content, className) => {
    const td = document.createElement("td");
    if (className) {
      td.className = className;
    }
    td.append(content);
    row.append(td);
    return td;
  };
  cell(String(record.partition), "num");
  cell(String(record.offset), "num");
  cell(record.timestamp).title = record.timestamp_type;
  cell(shown(record.key));
  cell(shown(record.value));
  const headers = cell("");
  for (const [name, value] of record.headers) {
    const div = document.createElement("div");
    const b = document.createElement("b");
    b.textContent = name;
    div.append(b, " ", shown(value));
    headers.append(div);
  }
  return row;
}

function liveTail(section) {
  const body = document.querySelector("#messages tbody");
  const status = document.getElementById("live-status");
  const start = document.getElementById("live-start");
  const pause = document.getElementById("live-pause");
  const stop = document.getElementById("live-stop");
  const maxRows = Math.max(parseInt(section.dataset.maxRows, 10) || 50, 1);
  let source = null;
  let positions = ""; // "partition:next offset,..." of what was shown; kept across a pause
  section.hidden = false;

  const say = (text) => {
    status.textContent = text;
  };
  const buttons = (running, paused) => {
    start.disabled = running || paused;
    pause.disabled = !running && !paused;
    pause.textContent = paused ? "Resume" : "Pause";
    stop.disabled = !running && !paused;
  };
  const close = () => {
    if (source !== null) {
      source.close();
      source = null;
    }
  };
  const open = () => {
    const query = new URLSearchParams();
    if (section.dataset.partition) {
      query.set("partition", section.dataset.partition);
    }
    if (positions) {
      query.set("from", positions);
    }
    source = new EventSource(`${section.dataset.url}?${query}`);
    buttons(true, false);
    say("Live: connecting…");
    source.addEventListener("ready", (event) => {
      positions = event.lastEventId;
      say(`Live: waiting for new records (from ${positions.replaceAll(",", ", ")}).`);
    });
    source.addEventListener("message", (event) => {
      for (const placeholder of body.querySelectorAll("td[colspan]")) {
        placeholder.parentElement.remove();
      }
      for (const record of JSON.parse(event.data)) {
        body.append(recordRow(record));
      }
      while (body.rows.length > maxRows) {
        body.rows[0].remove();
      }
      positions = event.lastEventId;
      say(`Live: showing new records (next offsets ${positions.replaceAll(",", ", ")}).`);
    });
    source.addEventListener("notice", (event) => {
      say(`Live: ${JSON.parse(event.data).message}`);
    });
    source.addEventListener("failure", (event) => {
      close();
      buttons(false, false);
      positions = "";
      say(`Live tail stopped: ${JSON.parse(event.data).message}`);
    });
    source.addEventListener("error", () => {
      if (source !== null && source.readyState === EventSource.CONNECTING) {
        say("Live: the console does not answer; trying again…");
      }
    });
  };

  start.addEventListener("click", open);
  pause.addEventListener("click", () => {
    if (source !== null) {
      close();
      buttons(false, true);
      say(`Paused (at ${positions.replaceAll(",", ", ") || "the end"}); resume to go on from there.`);
    } else {
      open();
    }
  });
  stop.addEventListener("click", () => {
    close();
    positions = "";
    buttons(false, false);
    say("Stopped.");
  });
  window.addEventListener("pagehide", close);
}

document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("auto-refresh");
  if (box) {
    autoRefresh(box);
  }
  const live = document.getElementById("live");
  if (live) {
    liveTail(live);
  }
});
