// memoryd's page: live refresh from /events, and deletes posted without leaving the page.
// No framework, no build step; everything also works as plain links and forms without this script.
"use strict";
(function () {
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  let pending = null;

  async function refresh() {
    pending = null;
    const res = await fetch(location.pathname + location.search, {
      headers: { "X-Memoryd-Partial": "1" },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!res.ok && res.status !== 404) return;
    const focused = document.activeElement && document.activeElement.id;
    main.innerHTML = await res.text();
    if (focused) {
      const again = document.getElementById(focused);
      if (again) again.focus();
    }
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  }

  function schedule() {
    if (pending === null) pending = setTimeout(refresh, 80);
  }

  function connect() {
    if (!window.EventSource) return;
    const source = new EventSource("/events");
    source.addEventListener("hello", function (e) {
      live.textContent = "live";
      live.classList.add("on");
      document.body.dataset.seq = JSON.parse(e.data).seq;
    });
    source.addEventListener("change", function (e) {
      document.body.dataset.seq = JSON.parse(e.data).seq;
      schedule();
    });
    source.onerror = function () {
      live.textContent = "reconnecting…";
      live.classList.remove("on");
    };
  }

  document.addEventListener("submit", async function (e) {
    const form = e.target;
    if (!form.classList || !form.classList.contains("del")) return;
    e.preventDefault();
    if (!window.confirm(form.dataset.confirm || "Delete?")) return;
    const button = form.querySelector("button");
    if (button) button.disabled = true;
    const res = await fetch(form.action, {
      method: "POST",
      body: new FormData(form),
      headers: { "X-Memoryd-Fetch": "1" },
      credentials: "same-origin",
    });
    if (!res.ok) {
      let message = "Could not delete (" + res.status + ")";
      try { message = (await res.json()).error || message; } catch (_) { /* not JSON */ }
      window.alert(message);
      if (button) button.disabled = false;
      return;
    }
    await refresh();
  });

  connect();
})();
