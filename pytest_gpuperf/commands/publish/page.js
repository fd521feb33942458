// The dashboard's script: unpack the plots and tooltips (gzip in base64), place each plot,
// tooltips on the points, and the search box. Nothing is fetched.
"use strict";
(function () {
  const tip = document.getElementById("tip");
  const note = document.getElementById("unpack-note");
  let tips = {};

  async function unpack() {
    const text = document.getElementById("gpuperf-data").textContent.trim();
    const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  function place(data) {
    tips = data.tips;
    for (const holder of document.querySelectorAll(".svg[data-sid]")) {
      holder.innerHTML = data.plots[holder.dataset.sid] || "";
      for (const group of holder.querySelectorAll("g[id]")) {
        const texts = tips[group.id];
        if (!texts) continue;
        // matplotlib writes a group's points in order: as <use> of one marker, or (where it
        // finds that costlier) as one <path> each
        let points = group.querySelectorAll("use");
        if (!points.length) points = group.querySelectorAll("path:not(defs path)");
        points.forEach((point, k) => {
          point.dataset.gid = group.id;
          point.dataset.k = String(k);
        });
      }
    }
  }

  function show(event) {
    const point = event.target.closest("[data-gid]");
    if (!point) { tip.hidden = true; return; }
    tip.textContent = tips[point.dataset.gid][Number(point.dataset.k)];
    tip.hidden = false;
    const x = Math.min(event.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    const y = Math.min(event.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  }

  function filter() {
    const words = document.getElementById("search").value.toLowerCase().split(/\s+/).filter(Boolean);
    const match = (el) => words.every((w) => el.dataset.search.includes(w));
    let shown = 0;
    for (const el of document.querySelectorAll("[data-search]")) {
      el.hidden = !match(el);
      if (!el.hidden) shown += 1;
    }
    for (const group of document.querySelectorAll("tbody.group")) {
      group.hidden = !group.querySelector("tr.m:not([hidden])");
    }
    // a filter that matches nothing says so, rather than leaving an empty page
    document.getElementById("no-match").hidden = shown > 0 || !words.length;
  }

  document.getElementById("search").addEventListener("input", filter);
  document.addEventListener("mouseover", show);
  document.addEventListener("mousemove", show);
  if (typeof DecompressionStream === "undefined") {
    note.textContent = "This browser cannot unpack the plots (it needs DecompressionStream: " +
      "Chrome 80, Firefox 113, Safari 16.4 or newer); the tables above are complete.";
    return;
  }
  unpack().then((data) => {
    place(data);
    note.hidden = true;
    window.gpuperfReadyMs = performance.now();
    document.body.dataset.ready = "yes";
  }).catch((error) => {
    note.textContent = "The plots could not be unpacked: " + error;
    document.body.dataset.ready = "failed";
    throw error;
  });
})();
