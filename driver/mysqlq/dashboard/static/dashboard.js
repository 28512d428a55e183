// mysqlq dashboard: refresh the page's live regions without reloading it.
// The page's own URL with partial=1 answers JSON: {"as_of": "...", "regions": {name: html}}.
(function () {
  "use strict";
  var body = document.body;
  if (!body || !body.hasAttribute("data-live")) {
    return;
  }
  var every = parseInt(body.getAttribute("data-refresh"), 10) || 2000;
  var status = document.getElementById("status");
  var asOf = document.getElementById("as-of");
  var busy = false;

  function show(kind, text) {
    if (status) {
      status.textContent = text;
      status.className = "status " + kind;
    }
  }

  function partialUrl() {
    var u = new URL(window.location.href);
    u.searchParams.set("partial", "1");
    return u.toString();
  }

  function apply(data) {
    Object.keys(data.regions).forEach(function (name) {
      var el = document.querySelector('[data-region="' + name + '"]');
      if (el) {
        el.innerHTML = data.regions[name];
      }
    });
    if (asOf && data.as_of) {
      asOf.textContent = "as of " + data.as_of;
    }
    body.setAttribute("data-refreshed", String(Date.now()));
  }

  function tick() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(partialUrl(), {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (r) {
        if (r.status === 401) {
          window.location.reload();  // the login page
          return null;
        }
        return r.json().then(function (data) {
          return { ok: r.ok, data: data };
        });
      })
      .then(function (res) {
        if (!res) {
          return;
        }
        if (!res.ok) {
          show("error", res.data.error + (res.data.detail ? ": " + res.data.detail : ""));
          return;
        }
        apply(res.data);
        show("live", "live");
      })
      .catch(function () {
        show("error", "dashboard unreachable");
      })
      .then(function () {
        busy = false;
      });
  }

  window.setInterval(tick, every);
})();
