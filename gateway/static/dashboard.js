// livefuse live dashboard: vanilla JS + canvas, no build step, no network beyond this gateway.
// Data: one GET /api/stats for history, then the SSE stream /api/stream (one StatsSnapshot per message).
// The ?token= of this page's URL is forwarded to every request (the gateway's auth middleware checks it).
"use strict";

(function () {
  const params = new URLSearchParams(window.location.search);
  const token = params.get("token");
  const q = token ? "?token=" + encodeURIComponent(token) : "";
  const MAX_POINTS = 300;
  const css = getComputedStyle(document.documentElement);
  const color = (name) => css.getPropertyValue(name).trim();
  const C = { grid: color("--grid"), dim: color("--dim"), fg: color("--fg"), ok: color("--ok"),
              warn: color("--warn"), bad: color("--bad"), a: color("--a"), b: color("--b"), c: color("--c") };
  const PALETTE = [C.a, C.b, C.c, "#e5c07b", "#56b6c2", "#d19a66", "#98c379", "#e06c75"];

  const state = {
    updates: 0,
    last: null,
    util: [],          // {t, cpu, gpu}
    mem: [],           // {t, mem, vram}
    fps: new Map(),    // session -> [{t, fps, drop}]
    lastDrops: new Map(),
  };
  window.__lf = state;  // for tests and for poking at it from devtools

  const $ = (id) => document.getElementById(id);
  const fmt = (v, d = 1) => (v === null || v === undefined || Number.isNaN(v) ? "–" : Number(v).toFixed(d));
  const mib = (b) => (b === null || b === undefined ? "–" : (b / 1048576).toFixed(0) + " MiB");
  const push = (arr, p) => { arr.push(p); if (arr.length > MAX_POINTS) arr.shift(); };

  // ---- canvas helpers ----------------------------------------------------------------------------------
  function setup(canvas) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 400, h = canvas.clientHeight || 190;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = "11px system-ui, sans-serif";
    return { ctx, w, h, l: 38, r: w - 8, t: 8, b: h - 18 };
  }

  function axes(g, yMax, yLabel) {
    const { ctx, l, r, t, b } = g;
    ctx.strokeStyle = C.grid; ctx.fillStyle = C.dim; ctx.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const y = b - (i / 4) * (b - t);
      ctx.beginPath(); ctx.moveTo(l, y); ctx.lineTo(r, y); ctx.stroke();
      ctx.fillText(fmt((yMax * i) / 4, yMax >= 10 ? 0 : 1), 2, y + 4);
    }
    if (yLabel) ctx.fillText(yLabel, l + 4, t + 10);
  }

  function timeLines(canvas, series, yMax, opts = {}) {
    const g = setup(canvas);
    axes(g, yMax, opts.label);
    const { ctx, l, r, t, b } = g;
    let t0 = Infinity, t1 = -Infinity;
    for (const s of series) for (const p of s.points) { t0 = Math.min(t0, p.t); t1 = Math.max(t1, p.t); }
    if (!Number.isFinite(t0)) { ctx.fillStyle = C.dim; ctx.fillText("waiting for data…", l + 10, (t + b) / 2); return; }
    const span = Math.max(t1 - t0, 10);
    const X = (tt) => l + ((tt - (t1 - span)) / span) * (r - l);
    const Y = (v) => b - (Math.min(v, yMax) / yMax) * (b - t);
    if (opts.hline !== undefined) {
      ctx.save(); ctx.strokeStyle = C.bad; ctx.setLineDash([5, 4]);
      ctx.beginPath(); ctx.moveTo(l, Y(opts.hline)); ctx.lineTo(r, Y(opts.hline)); ctx.stroke();
      ctx.fillStyle = C.bad; ctx.fillText(opts.hlineLabel || "", r - 60, Y(opts.hline) - 3); ctx.restore();
    }
    for (const s of series) {
      ctx.strokeStyle = s.color; ctx.lineWidth = 1.6; ctx.beginPath();
      let started = false;
      for (const p of s.points) {
        if (p.v === null || p.v === undefined) { started = false; continue; }
        const x = X(p.t), y = Y(p.v);
        if (!started) { ctx.moveTo(x, y); started = true; } else ctx.lineTo(x, y);
      }
      ctx.stroke();
      if (s.marks) {
        ctx.fillStyle = C.bad;
        for (const p of s.points) if (p.mark) ctx.fillRect(X(p.t) - 1, b - 10, 2.5, 10);
      }
    }
    ctx.fillStyle = C.dim; ctx.fillText("last " + span.toFixed(0) + " s", r - 60, b + 14);
  }

  function bars(canvas, labels, groups, opts = {}) {
    // groups: [{name, color, values[]}] drawn side by side per label (horizontal bars)
    const g = setup(canvas);
    const { ctx, w, h } = g;
    const left = 110, right = w - 50, top = 6, rowH = Math.min(26, (h - 12) / Math.max(labels.length, 1));
    let max = opts.max || 0;
    for (const gr of groups) for (const v of gr.values) max = Math.max(max, v || 0);
    if (!labels.length || max <= 0) { ctx.fillStyle = C.dim; ctx.fillText("no frames yet", left, h / 2); return; }
    labels.forEach((lab, i) => {
      const y = top + i * rowH;
      ctx.fillStyle = C.fg; ctx.fillText(lab, 4, y + rowH * 0.6);
      const bh = (rowH - 4) / groups.length;
      groups.forEach((gr, j) => {
        const v = gr.values[i] || 0;
        ctx.fillStyle = gr.color;
        ctx.fillRect(left, y + j * bh, ((right - left) * v) / max, bh - 1);
        ctx.fillStyle = C.dim; ctx.fillText(fmt(v, 1), left + ((right - left) * v) / max + 4, y + j * bh + bh - 2);
      });
    });
  }

  function histogram(canvas, bounds, counts, budget) {
    const g = setup(canvas);
    const { ctx, l, r, t, b } = g;
    const n = counts.length;
    const max = Math.max(1, ...counts);
    axes(g, max, "frames");
    const bw = (r - l) / n;
    counts.forEach((c, i) => {
      const over = i > 0 ? bounds[i - 1] >= budget : false;
      ctx.fillStyle = over ? C.bad : C.a;
      const hgt = (c / max) * (b - t);
      ctx.fillRect(l + i * bw + 1, b - hgt, bw - 2, hgt);
    });
    ctx.fillStyle = C.dim;
    bounds.forEach((bd, i) => { if (i % 3 === 0) ctx.fillText(String(bd), l + (i + 1) * bw - 6, b + 13); });
    // budget line: right edge of the bucket whose upper bound is the budget (or interpolated)
    let idx = bounds.findIndex((bd) => bd >= budget);
    if (idx < 0) idx = bounds.length;
    const x = l + (idx + 1) * bw;
    ctx.save(); ctx.strokeStyle = C.bad; ctx.setLineDash([5, 4]);
    ctx.beginPath(); ctx.moveTo(x, t); ctx.lineTo(x, b); ctx.stroke(); ctx.restore();
    ctx.fillStyle = C.bad; ctx.fillText("budget " + budget + " ms", Math.min(x + 4, r - 80), t + 12);
  }

  // ---- data -----------------------------------------------------------------------------------------------
  function ingestHistory(s) {
    for (const p of s.series || []) {
      push(state.util, { t: p.t, cpu: p.cpu, gpu: p.gpu_util });
      push(state.mem, { t: p.t, mem: p.mem_percent, vram: p.vram_percent });
    }
  }

  function ingest(s) {
    const t = s.uptime_s;
    const sys = s.system || {};
    const gpu0 = (s.gpu.devices || [])[0];
    const lastU = state.util[state.util.length - 1];
    if (!lastU || t > lastU.t) {
      push(state.util, { t, cpu: sys.cpu_percent, gpu: gpu0 ? gpu0.util_percent : null });
      push(state.mem, { t, mem: sys.mem_percent, vram: gpu0 ? gpu0.mem_percent : null });
    }
    for (const x of s.sessions.list) {
      if (!x.open) continue;
      if (!state.fps.has(x.session_id)) state.fps.set(x.session_id, []);
      const drops = x.dropped.stale + x.dropped.deadline + x.dropped.error;
      const prev = state.lastDrops.has(x.session_id) ? state.lastDrops.get(x.session_id) : drops;
      state.lastDrops.set(x.session_id, drops);
      push(state.fps.get(x.session_id), { t, v: x.fps_out, mark: drops > prev });
    }
    const open = new Set(s.sessions.list.filter((x) => x.open).map((x) => x.session_id));
    for (const k of [...state.fps.keys()]) if (!open.has(k)) { state.fps.delete(k); state.lastDrops.delete(k); }
  }

  function render(s) {
    const dg = s.degradation;
    $("sessions-open").textContent = s.sessions.open;
    $("fps").textContent = fmt(s.frames.fps_in) + " / " + fmt(s.frames.fps_out);
    $("p95").textContent = s.latency.server_ms.count ? fmt(s.latency.server_ms.p95) + " ms" : "–";
    $("budget").textContent = s.budget_ms + " ms";
    const lv = $("level");
    lv.textContent = dg.level + " " + dg.level_name + (dg.enabled ? "" : " (off)");
    lv.className = "lvl" + dg.level;
    $("capacity").textContent = dg.capacity_sessions === null ? "–" : dg.capacity_sessions + " sessions";
    $("maxbatch").textContent = dg.recommended_max_batch;
    $("gpu-status").textContent = s.gpu.available
      ? s.gpu.devices.map((d) => d.name + " " + fmt(d.util_percent, 0) + "%").join(", ")
      : "no GPU";
    $("gpu-status").title = s.gpu.reason || "";
    $("cost").textContent = s.monitor ? fmt(100 * s.monitor.cpu_fraction_of_core, 2) + "% of a core" : "–";
    const au = s.audio;
    $("audio").textContent = au
      ? au.sessions_with_audio + " streams · " + au.viewers_with_audio + " viewers · " +
        au.packets_relayed + " pkts relayed" + (au.packets_dropped ? " (" + au.packets_dropped + " dropped)" : "")
      : "–";
    $("audio").title = au ? "Opus relayed untouched; sender reports stamped to capture time: " +
      au.sender_reports_stamped : "";

    timeLines($("chart-util"), [
      { color: C.a, points: state.util.map((p) => ({ t: p.t, v: p.cpu })) },
      { color: C.c, points: state.util.map((p) => ({ t: p.t, v: p.gpu })) },
    ], 100, { label: "%" });
    $("util-legend").innerHTML = '<i style="background:' + C.a + '"></i>CPU <i style="background:' + C.c +
      '"></i>GPU' + (s.gpu.available ? "" : " (no GPU)");

    timeLines($("chart-mem"), [
      { color: C.a, points: state.mem.map((p) => ({ t: p.t, v: p.mem })) },
      { color: C.b, points: state.mem.map((p) => ({ t: p.t, v: p.vram })) },
    ], 100, { label: "% used", hline: 90, hlineLabel: "90% warn" });
    const sys = s.system || {};
    $("mem-peaks").textContent = "RSS " + mib(sys.rss_bytes) + " (peak " + mib(sys.rss_peak_bytes) + ")" +
      (s.gpu.available ? " · VRAM peak " + mib(s.gpu.vram_peak_bytes) : "");

    const fpsSeries = [];
    let fpsMax = 5, i = 0;
    for (const [, pts] of state.fps) {
      for (const p of pts) fpsMax = Math.max(fpsMax, p.v * 1.2);
      fpsSeries.push({ color: PALETTE[i++ % PALETTE.length], points: pts, marks: true });
    }
    timeLines($("chart-fps"), fpsSeries, Math.ceil(fpsMax), { label: "fps out" });

    histogram($("chart-hist"), s.latency.histogram.bounds_ms, s.latency.histogram.counts, s.budget_ms);
    $("hist-note").textContent = s.latency.server_ms.count + " frames, p95 " + fmt(s.latency.server_ms.p95) + " ms";

    const stages = Object.keys(s.latency.stages_ms);
    bars($("chart-stages"), stages, [
      { color: C.a, values: stages.map((k) => s.latency.stages_ms[k].mean) },
      { color: C.b, values: stages.map((k) => s.latency.stages_ms[k].p95) },
    ]);
    const bstages = Object.keys(s.batch);
    bars($("chart-batch"), bstages, [
      { color: C.c, values: bstages.map((k) => s.batch[k].mean) },
      { color: C.warn, values: bstages.map((k) => s.batch[k].max) },
    ]);

    const body = $("sessions-body");
    body.replaceChildren(...s.sessions.list.map((x) => {
      const tr = document.createElement("tr");
      tr.dataset.session = x.session_id;
      const cells = [x.session_id, x.width ? x.width + "x" + x.height : "–", fmt(x.age_s, 0), fmt(x.fps_in),
        fmt(x.fps_out), x.frames_in, x.frames_out, x.dropped.stale, x.dropped.deadline, x.dropped.error,
        fmt(x.server_ms.p50), fmt(x.server_ms.p95), fmt(x.server_ms.p99), fmt(x.send_kbps, 0),
        fmt(x.path_queue_ms, 0), x.open ? "open" : "closed: " + x.close_reason];
      for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
      return tr;
    }));

    const list = $("events");
    list.replaceChildren(...[...s.events].reverse().map((e) => {
      const li = document.createElement("li");
      li.className = e.kind;
      const k = document.createElement("span"); k.className = "k"; k.textContent = e.kind;
      const when = new Date(e.t * 1000).toLocaleTimeString();
      li.append(when + " ", k, " " + e.message);
      return li;
    }));
    $("event-counts").textContent = Object.entries(s.event_counts).map(([k, v]) => k + " " + v).join(" · ");
  }

  function update(s) {
    state.last = s;
    ingest(s);
    render(s);
    state.updates += 1;
    document.body.dataset.updates = String(state.updates);
  }

  function connect() {
    const es = new EventSource("api/stream" + q);
    es.addEventListener("stats", (ev) => {
      $("conn").className = "kv live"; $("conn").querySelector("b").textContent = "live";
      try { update(JSON.parse(ev.data)); } catch (err) { console.error("bad stats message", err); }
    });
    es.onerror = () => { $("conn").className = "kv down"; $("conn").querySelector("b").textContent = "reconnecting"; };
    state.source = es;
  }

  fetch("api/stats" + q, { cache: "no-store" })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status))))
    .then((s) => { ingestHistory(s); update(s); })
    .catch((err) => console.error("initial stats", err))
    .finally(connect);
  window.addEventListener("resize", () => { if (state.last) render(state.last); });
})();
