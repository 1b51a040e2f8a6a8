// The console's only script. Pages work without it; it asks before a form that destroys
// something (data-confirm) and refreshes a group's page every 5 s when asked to.
"use strict";

document.addEventListener("submit", (event) => {
  const question = event.target.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});

document.addEventListener("DOMContentLoaded", () => {
  const box = document.getElementById("auto-refresh");
  if (!box) {
    return;
  }
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
});
