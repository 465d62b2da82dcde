"use strict";
(function () {
  var started = performance.now(), errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  document.addEventListener("securitypolicyviolation", function (e) { errors.push("blocked by CSP: " + e.violatedDirective); });
  var $ = function (s, el) { return (el || document).querySelector(s); };
  var $$ = function (s, el) { return Array.prototype.slice.call((el || document).querySelectorAll(s)); };
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  }

  // Sorting: a header click sorts its table's rows by the cells' data-v.
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    var num = th.dataset.type === "num", asc = th.dataset.dir !== "asc";
    $$("th", table).forEach(function (h) { delete h.dataset.dir; });
    th.dataset.dir = asc ? "asc" : "desc";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[i].dataset.v, y = b.cells[i].dataset.v;
      var c = num ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  }
  $$("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () { sortBy(th); });
  });

  // Filtering the operator table by text and status.
  var filter = $("#filter"), status = $("#status-filter"), shown = $("#shown");
  function applyFilter() {
    var q = filter.value.trim().toLowerCase(), s = status.value, n = 0, rows = $$("#ops tbody tr");
    rows.forEach(function (r) {
      var ok = (!q || r.textContent.toLowerCase().indexOf(q) >= 0) && (!s || r.dataset.status === s);
      r.hidden = !ok;
      if (ok) n++;
    });
    shown.textContent = n + " of " + rows.length + " shown";
  }
  if (filter) { filter.addEventListener("input", applyFilter); status.addEventListener("change", applyFilter); applyFilter(); }

  // A round's texts are rendered when it is first opened, as text nodes only.
  function block(title, text, open, cls) {
    var d = el("details", "text");
    d.open = !!open;
    var lines = text ? text.split("\n").length : 0;
    d.appendChild(el("summary", null, title + (text ? " (" + lines + " line" + (lines === 1 ? "" : "s") + ")" : " (empty)")));
    var pre = el("pre", cls || null);
    if (cls === "diff") {
      text.split("\n").forEach(function (line) {
        var c = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "";
        pre.appendChild(el("span", c, line + "\n"));
      });
    } else {
      pre.textContent = text;
    }
    d.appendChild(pre);
    return d;
  }
  // An operator's round texts: base64 of gzipped JSON, unpacked once, when first needed.
  function rounds(op) {
    if (!op._rounds) {
      var packed = $("script.rounds", op), bin = atob(packed ? packed.textContent.trim() : "");
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
      op._rounds = new Response(stream).text().then(JSON.parse);
    }
    return op._rounds;
  }
  function fill(details) {
    var body = $(".body", details);
    if (!body || !body.dataset.empty) return;
    delete body.dataset.empty;
    body.textContent = "…";
    rounds(details.closest("details.op")).then(function (all) {
      var p = all[+details.dataset.i];
      body.textContent = "";
      body.appendChild(block("verdict", p.verdict, true));
      if (p.diff) body.appendChild(block("diff against this worker's previous round", p.diff, true, "diff"));
      else if (p.has_previous) body.appendChild(el("p", "muted", "candidate unchanged from this worker's previous round"));
      body.appendChild(block("candidate", p.candidate, !p.has_previous));
      body.appendChild(block("feedback sent back", p.feedback, false));
      body.appendChild(block("prompt (last message)", p.prompt, false));
      body.appendChild(block("answer", p.answer, false));
      body.dataset.filled = "1";
    }).catch(function (e) {
      errors.push("round texts: " + e);
      body.textContent = "could not unpack this round's texts: " + e;
    });
  }
  document.addEventListener("toggle", function (e) {
    if (e.target.classList && e.target.classList.contains("round") && e.target.open) fill(e.target);
  }, true);

  // Links to a round or an operator open it and the sections around it.
  function reveal(id) {
    var t = document.getElementById(id);
    if (!t) return;
    for (var d = t; d; d = d.parentElement) if (d.tagName === "DETAILS") { d.open = true; if (d.classList.contains("round")) fill(d); }
    t.scrollIntoView();
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest && e.target.closest(".jump");
    if (a) { e.preventDefault(); reveal(a.dataset.target); history.replaceState(null, "", "#" + a.dataset.target); }
  });

  // #selftest: exercise sorting, filtering and a round through the DOM; results go into #selftest.
  function selftest() {
    var out = { errors: errors, checks: {} }, th = $("#ops thead th");
    function names() { return $$("#ops tbody tr").map(function (r) { return r.cells[0].dataset.v; }); }
    th.click();
    var asc = names(), sorted = asc.slice().sort(function (a, b) { return a.localeCompare(b); });
    out.checks.sort_asc = asc.join() === sorted.join();
    th.click();
    out.checks.sort_desc = names().join() === sorted.slice().reverse().join();
    filter.value = asc[0] || "";
    applyFilter();
    out.checks.filter = $$("#ops tbody tr").filter(function (r) { return !r.hidden; }).length >= 1;
    filter.value = "";
    applyFilter();
    var round = $("details.round");
    out.checks.rounds = $$("details.round").length;
    if (round) {
      round.parentElement.closest("details").open = true;
      $("summary", round).click();
    }
    var box = $("#selftest");
    out.script_start_ms = Math.round(started);
    box.textContent = JSON.stringify(out);
    var tries = 0;
    (function check() {
      var body = round && $(".body", round);
      if (body && !body.dataset.filled && tries++ < 100) return setTimeout(check, 20);
      if (round) {
        out.checks.round_open = round.open;
        out.checks.round_blocks = $$(".body pre", round).length;
        out.checks.round_text = body.textContent.length;
        out.checks.round_has_script_text = body.textContent.indexOf("<\/script>") >= 0;
      }
      var nav = performance.getEntriesByType("navigation")[0];
      out.load_ms = nav ? Math.round(nav.loadEventEnd) : null;
      out.injected = !!window.__injected;
      box.textContent = JSON.stringify(out);
      box.hidden = false;
      box.dataset.done = "1";
    })();
  }
  if (location.hash === "#selftest") selftest();
  else if (location.hash.length > 1) { try { reveal(decodeURIComponent(location.hash.slice(1))); } catch (e) { /* not one of ours */ } }
})();
