"""Writes notebooks/baseline.ipynb from the cells below (outputs stripped).

The notebook is generated so that its source stays reviewable as plain Python; edit the
cells here and run: .tools/venv/bin/python notebooks/make_notebook.py
"""
import nbformat as nbf

CELLS = [
    ("md", """# leaderwatch baseline: one run, five figures

Given a run directory (`RUN_DIR`, default: the committed leader rehearsal), draws

1. `fig-counters.png`: each member's `etcd_server_leader_changes_seen_total` and the raft
   term over time, windows shaded, the disruption and the disruptor's / Kubernetes' events
   marked, and each election marked at the moment it was observed with its term change and
   cause (`elections_detail` in `baseline.json`, schema 3 on);
2. `fig-swimlanes.png`: health and reachability swimlanes per member and, when the run has
   a `canary.csv`, one canary lane per kind (write, read): each op a dot at its start, its
   latency on a log scale, coloured by the member that answered; failed ops a red × in the
   shaded band at the top of the lane; a slow op's line runs from its start to its end.
   Below them, when the run has a `locks.csv`, the lock lane (the lock canary: holders
   taking turns on one etcd lock as Go's `concurrency.Mutex` does), one row per holder:
   each grant a bar in the holder's colour from `granted` to that holder's next `released`
   or `lease_lost` (the end of the data when neither came); a failed acquire, release or
   keep-alive a red × on the holder's row; a lost lease a black diamond (filled: lost while
   holding the lock); the longest time between two grants in the disruption window shaded
   grey, labelled with its length and, when `baseline.json` has it, the window's
   `lock.longest_unavailable_s` (the same less the hold).
   Its time axis and margins are those of `fig-counters.png`, so the two line up;
3. `fig-waterfall.png`: the recovery waterfall (gaps between the recovery steps as bars);
   a Kubernetes event step (`k8s_event`) is labelled with the event's reason (`Killing`,
   `Scheduled`, `Pulled`, `Started`, ...), taken from the `events.csv` row of kind
   `k8s_event` with the same timestamp (to the millisecond);
4. `fig-health.png`: member health per interval from `health.csv`: WAL fsync p99 and
   backend commit p99 per member against the thresholds etcd documents (10 ms / 25 ms) and
   the etcd mixin alerts on (0.5 s / 0.25 s), and the heartbeat send failures and slow
   applies per interval. A missing value (no observation in the interval) is a gap, never 0;
5. `fig-zoom.png`: the disruption close up, from 2 s before the request to 3 s after the
   healthy list (the disruption window when either instant is missing), in seconds since
   the request: counters and raft term per member, the canary and lock lanes, and every waterfall
   step as a vertical marker, labelled (staggered so that steps a millisecond apart stay
   legible; steps later than the zoom are listed under its time axis). On a 20-minute
   Kubernetes sitting the disruption is a sliver of the other figures.

The PNGs go next to the run's data (or to `FIG_DIR`). It runs unchanged on a local
rehearsal and on a Kubernetes run: it reads only `samples.csv`, `events.csv`,
`baseline.json`, `health.csv`, `canary.csv` and `locks.csv` (formats in `data/README.md`).
Runs recorded before `health.csv` and election causes existed (baseline.json schema 2) get
no `fig-health.png` and no causes; runs recorded without the canary get no canary lanes;
runs recorded without the lock canary (no `locks.csv`) get no lock lane; the notebook says
so."""),
    ("code", """import json, math, os, pathlib
import matplotlib
matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.patches as mpatches
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import pandas as pd

ROOT = pathlib.Path.cwd() if (pathlib.Path.cwd() / "data").exists() else pathlib.Path.cwd().parent
RUN_DIR = pathlib.Path(os.environ.get("RUN_DIR") or sorted((ROOT / "data").glob("rehearsal-leader-*"))[-1])
FIG_DIR = pathlib.Path(os.environ.get("FIG_DIR") or RUN_DIR)
FIG_DIR.mkdir(parents=True, exist_ok=True)

samples = pd.read_csv(RUN_DIR / "samples.csv", parse_dates=["ts"])
events = pd.read_csv(RUN_DIR / "events.csv", parse_dates=["ts"], keep_default_na=False)
baseline = json.loads((RUN_DIR / "baseline.json").read_text())
run_id = baseline["run_id"]
samples = samples[samples["run_id"] == run_id]
# Stable: rows with the same ts keep their write order (k8s_event matching relies on it).
events = events[events["run_id"] == run_id].sort_values("ts", kind="stable")
env = baseline["environment"]["description"]
disruption = baseline.get("disruption") or {}
members = sorted(samples["member"].unique())
# Schema 3 on: every election with its cause; older runs have none.
elections = [e for w in baseline["windows"] for e in w.get("elections_detail") or []]
health = None
if (RUN_DIR / "health.csv").exists():
    health = pd.read_csv(RUN_DIR / "health.csv", parse_dates=["ts", "interval_start"])
    health = health[health["run_id"] == run_id]
# The canary (a client's writes and reads), from the disruption request to the end of settle.
canary = None
if (RUN_DIR / "canary.csv").exists():
    canary = pd.read_csv(RUN_DIR / "canary.csv", parse_dates=["started", "done"])
    canary = canary[canary["run_id"] == run_id].sort_values("started", kind="stable")
    canary["ok"] = canary["ok"].astype(str).str.lower() == "true"
    canary["member"] = canary["member"].fillna("").astype(str)
    if canary.empty:
        canary = None
# The lock canary (holders taking turns on one lock; `holder` empty on the server's own
# `created` / `deleted` rows), over the same span as the canary.
locks = None
if (RUN_DIR / "locks.csv").exists():
    locks = pd.read_csv(RUN_DIR / "locks.csv", parse_dates=["at"])
    locks = locks[locks["run_id"] == run_id].sort_values("at", kind="stable").reset_index(drop=True)
    locks["held"] = locks["held"].astype(str).str.lower() == "true"
    if locks["holder"].dropna().empty:
        print(f"locks.csv in {RUN_DIR.name} has no holder rows of run {run_id}: no lock lane in fig-swimlanes.png and fig-zoom.png")
        locks = None
print(RUN_DIR.name, "|", env, "|", len(samples), "rows,", len(members), "members")
if any("elections_detail" in w for w in baseline["windows"]):
    def _cost(e):
        return f", writes unavailable {e['write_unavailable_s']:.3f} s" if e.get("write_unavailable_s") is not None else ""
    print("elections:", ", ".join(f"term {e['term_from']}->{e['term_to']} {e['cause']}{_cost(e)}" for e in elections) or "none")
else:
    print(f"elections: causes not recorded (baseline.json schema {baseline.get('schema_version')})")
if canary is None:
    print(f"no canary.csv in {RUN_DIR.name} (recorded without the canary): no canary lanes in fig-swimlanes.png and fig-zoom.png")
else:
    def _ms(v):
        return "-" if v is None else f"{v:.1f} ms"
    print(f"canary: {len(canary)} ops ({(~canary['ok']).sum()} failed)")
    for w in baseline["windows"]:
        for kind, c in (w.get("client") or {}).items():
            print(f"  {w['name']:<10} {kind:<5} {c['ops']:>4} ops, {c['failures']:>3} failed, availability {c['availability']:.1%},"
                  f" p50 {_ms(c.get('p50_ms'))}, p99 {_ms(c.get('p99_ms'))}, longest unavailable {c['longest_unavailable_s']:.3f} s")
if not (RUN_DIR / "locks.csv").exists():
    print(f"no locks.csv in {RUN_DIR.name} (recorded without the lock canary): no lock lane in fig-swimlanes.png and fig-zoom.png")
elif locks is not None:
    def _s(v):
        return "-" if v is None else f"{v:.3f} s"
    _n = locks["event"].value_counts()
    _lost = locks[locks["event"] == "lease_lost"]
    safety = baseline.get("lock_safety")
    _safety = (f"safety {safety['verdict']} ({safety['grants_checked']} grants checked, {safety['grants_without_end']} without an end)"
               if safety else "safety: no lock_safety in baseline.json")
    print(f"lock canary: {_n.get('granted', 0)} grants, {_n.get('acquire_failed', 0)} acquire failures,"
          f" {len(_lost)} leases lost ({_lost['held'].sum()} while held), {_safety}")
    for what in ("tokens_not_increasing", "overlaps"):
        for line in (safety or {}).get(what) or []:
            print(f"  {what}: {line}")
    for w in baseline["windows"]:
        if w.get("lock"):
            k = w["lock"]
            print(f"  {w['name']:<10} {k['grants']:>4} grants, {k['acquire_failures']:>3} acquire failures, {k['leases_lost']} leases lost"
                  f" ({k['leases_lost_while_held']} while held), longest unavailable {_s(k.get('longest_unavailable_s'))},"
                  f" hand-over p50 {_s(k.get('handover_p50_s'))}")"""),
    ("code", """WINDOW_COLOURS = {"at_rest": "#e8f1fb", "disruption": "#fde8e8", "settle": "#eaf7ea"}

def same(t):
    return t

def shade_windows(ax, x=same):
    for w in baseline["windows"]:
        ax.axvspan(x(pd.Timestamp(w["start"])), x(pd.Timestamp(w["end"])), color=WINDOW_COLOURS.get(w["name"], "#eee"), zorder=0)

def mark_disruption(ax, x=same):
    for key, style in (("requested_at", "--"), ("healthy_at", ":")):
        if disruption.get(key):
            ax.axvline(x(pd.Timestamp(disruption[key])), color="black", linestyle=style, linewidth=1)

# fig-counters.png and fig-swimlanes.png share their time axis and side margins, so that
# one stacked on the other lines up.
_span = [samples["ts"].min(), samples["ts"].max()] + [pd.Timestamp(w[k]) for w in baseline["windows"] for k in ("start", "end")]
if canary is not None:
    _span += [canary["started"].min(), canary["done"].max()]
if locks is not None:
    _span += [locks["at"].min(), locks["at"].max()]
_span = [t for t in _span if pd.notna(t)]
XLIM = (min(_span) - (max(_span) - min(_span)) * 0.02, max(_span) + (max(_span) - min(_span)) * 0.02)
MARGINS = dict(left=0.08, right=0.98)

def time_axis(ax):
    ax.set_xlim(XLIM)
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(maxticks=9))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))

# The canary lanes: latency (ms, log) of each op at its start, coloured by the member that
# answered; failed ops as a red x in the shaded band at the top (their latency is the
# deadline or a refused connection, not a service time). Both kinds share one scale.
if canary is not None:
    _ok = canary.loc[canary["ok"], "latency_ms"].clip(lower=0.01)
    _lo = math.floor(math.log10(min(_ok.min(), 1.0))) if len(_ok) else -1
    _hi = math.ceil(math.log10(max(_ok.max(), 10.0))) if len(_ok) else 3
    CANARY_Y = (10.0 ** _lo, 10.0 ** _hi, 10.0 ** (_hi + 0.3 * (_hi - _lo)))  # bottom, top of data, top of the band

def canary_lane(ax, kind, x=same):
    d = canary[canary["kind"] == kind]
    bottom, top, band = CANARY_Y
    ax.axhspan(top, band, color="#fbdada", zorder=0.5, linewidth=0)
    for m in sorted(d.loc[d["ok"], "member"].unique()):
        o = d[d["ok"] & (d["member"] == m)]
        y = o["latency_ms"].clip(lower=bottom)
        ax.scatter(x(o["started"]), y, s=9, color=member_colour(m), zorder=3, linewidths=0)
        ax.hlines(y, x(o["started"]), x(o["done"].fillna(o["started"])), color=member_colour(m), linewidth=1, alpha=0.5, zorder=2)
    bad = d[~d["ok"]]
    ax.scatter(x(bad["started"]), [math.sqrt(top * band)] * len(bad), marker="x", s=22, color="#d62728", zorder=3)
    # Each op also spans start -> done (visible only for slow ones): a gap between dots is
    # an op still in flight, holding up the next one of its kind.
    ax.hlines([math.sqrt(top * band)] * len(bad), x(bad["started"]), x(bad["done"].fillna(bad["started"])), color="#d62728", linewidth=1, alpha=0.5, zorder=2)
    ax.set_yscale("log")
    ax.set_ylim(bottom, band)
    ax.yaxis.set_major_locator(mticker.FixedLocator([10.0 ** k for k in range(round(math.log10(bottom)), round(math.log10(top)) + 1)]))
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_locator(mticker.NullLocator())
    ax.set_ylabel(f"canary {kind} (ms)\\n{len(bad)} of {len(d)} failed", fontsize=9)

def member_colour(m):
    return f"C{members.index(m)}" if m in members else "gray"

# The lock lane: one row per holder. Each grant a bar from its `granted` to that holder's
# next `released` or `lease_lost` (the next `granted`, or the end of the data, when neither
# came first); failed ops (acquire, release, keep-alive) a red x on the holder's row; a lost
# lease a black diamond, filled when the holder held the lock. Shaded: the longest time
# between two grants in the disruption window (the interval before a window's first grant
# starts at the last grant before it, as baseline.json counts it).
LOCK_FAILED = ["acquire_failed", "release_failed", "keepalive_failed"]
HOLDER_COLOURS = ["#17becf", "#8c564b", "#bcbd22", "#e377c2", "#7f7f7f", "#9467bd"]  # not the members' C0-C2, not the failures' red
if locks is not None:
    holders = sorted(int(h) for h in locks["holder"].dropna().unique())
    _held = []
    for h in holders:
        d = locks[locks["holder"] == h]
        start = None
        for at, ev in zip(d["at"], d["event"]):
            if ev == "granted" and start is not None:
                _held.append((h, start, at))
            if ev == "granted":
                start = at
            elif ev in ("released", "lease_lost") and start is not None:
                _held.append((h, start, at))
                start = None
        if start is not None:
            _held.append((h, start, locks["at"].max()))
    grants = pd.DataFrame(_held, columns=["holder", "start", "end"])
    _g = locks.loc[locks["event"] == "granted", ["at", "window"]]
    _gaps = pd.DataFrame({"start": _g["at"].shift(), "end": _g["at"], "window": _g["window"]}).dropna(subset=["start"])
    _gaps = _gaps[_gaps["window"] == "disruption"]
    LOCK_GAP = _gaps.loc[(_gaps["end"] - _gaps["start"]).idxmax()] if len(_gaps) else None
    _dlock = next((w.get("lock") for w in baseline["windows"] if w["name"] == "disruption"), None) or {}
    LOCK_UNAVAILABLE_S = _dlock.get("longest_unavailable_s")

def holder_colour(h):
    return HOLDER_COLOURS[holders.index(h) % len(HOLDER_COLOURS)]

def lock_lane(ax, xlim, x=same):
    row = {h: i for i, h in enumerate(holders)}
    for h in holders:
        g = grants[grants["holder"] == h]
        ax.barh([row[h]] * len(g), x(g["end"]) - x(g["start"]), left=x(g["start"]), height=0.6, color=holder_colour(h), linewidth=0, zorder=2)
    bad = locks[locks["event"].isin(LOCK_FAILED)]
    ax.scatter(x(bad["at"]), bad["holder"].map(row), marker="x", s=22, color="#d62728", zorder=4)
    lost = locks[locks["event"] == "lease_lost"]
    ax.scatter(x(lost["at"]), lost["holder"].map(row), marker="D", s=28, facecolors=["black" if v else "white" for v in lost["held"]],
               edgecolors="black", zorder=5)
    top = len(holders) - 0.4 + 0.9  # a band over the rows for the gap's label
    if LOCK_GAP is not None:
        a, b = x(LOCK_GAP["start"]), x(LOCK_GAP["end"])
        ax.axvspan(a, b, color="#7f7f7f", alpha=0.3, linewidth=0, zorder=1)
        text = f"{(LOCK_GAP['end'] - LOCK_GAP['start']).total_seconds():.3f} s between grants"
        if LOCK_UNAVAILABLE_S is not None:
            text += f": lock unavailable {LOCK_UNAVAILABLE_S:.3f} s (less the hold)"
        # Over the shade, running right; or, in the right half, left (to stay inside).
        right = a > xlim[0] + (xlim[1] - xlim[0]) / 2
        ax.annotate(text, (b if right else a, top - 0.45), xytext=(-3 if right else 3, 0), textcoords="offset points", ha="right" if right else "left",
                    va="center", fontsize=8, color="black", zorder=6,
                    bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.8))
    ax.set_ylim(-0.6, top)
    ax.set_yticks(range(len(holders)), [str(h) for h in holders], fontsize=8)
    ax.set_ylabel(f"lock holder\\n{len(grants)} grants, {len(bad)} failed ops", fontsize=9)

def lock_height():
    return 0.25 * len(holders) + 0.9

def lane_legend(fig, height_in):
    # One legend row for the canary lanes and one for the lock lane, under the figure (a
    # legend inside a lane hides ops).
    rows = []
    if canary is not None:
        answered = sorted(canary.loc[canary["ok"], "member"].unique())
        handles = [plt.Line2D([], [], linestyle="", marker="o", markersize=4, color=member_colour(m), label=f"ok, answered by {m or '?'}") for m in answered]
        handles.append(plt.Line2D([], [], linestyle="", marker="x", markersize=6, color="#d62728", label="failed (in the top band, whatever its latency); a line: the op from start to done"))
        rows.append(handles)
    if locks is not None:
        handles = [mpatches.Patch(color=holder_colour(h), label=f"holder {h} holds" if h == holders[0] else f"holder {h}") for h in holders]
        handles.append(plt.Line2D([], [], linestyle="", marker="x", markersize=6, color="#d62728", label="lock op failed (acquire, release, keep-alive)"))
        handles.append(plt.Line2D([], [], linestyle="", marker="D", markersize=5, color="black", label="lease lost (hollow: not held)"))
        handles.append(mpatches.Patch(color="#7f7f7f", alpha=0.3, label="longest gap between grants"))
        rows.append(handles)
    for k, handles in enumerate(reversed(rows)):
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.25 * k / height_in), ncol=len(handles), fontsize=8, frameon=False)
    return (0.3 + 0.25 * (len(rows) - 1)) / height_in if rows else 0  # the bottom of the rect tight_layout may use

def legend_height():
    return 0.3 + 0.25 * ((canary is not None) + (locks is not None) - 1) if canary is not None or locks is not None else 0

fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 6), sharex=True)
# Members often share a value: each line is offset by a few hundredths so all stay visible.
for i, m in enumerate(members):
    d = samples[samples["member"] == m]
    off = 0.04 * (i - (len(members) - 1) / 2)
    c = d.dropna(subset=["leader_changes_seen_total"])
    ax1.step(c["ts"], c["leader_changes_seen_total"] + off, where="post", label=m, linewidth=1.5)
    t = d.dropna(subset=["raft_term"])
    ax2.step(t["ts"], t["raft_term"] + off, where="post", label=m, linewidth=1.5)
for ax in (ax1, ax2):
    shade_windows(ax)
    mark_disruption(ax)
time_axis(ax1)
marks = events[events["source"].isin(["local", "kubernetes"]) & (events["kind"] != "k8s_event")]
for _, e in marks.iterrows():
    ax1.annotate(e["kind"], (e["ts"], ax1.get_ylim()[1]), rotation=90, fontsize=7, va="top", ha="right", color="dimgray")
# Each election at the moment it was observed, with its cause, written in the raft-term
# panel where the lines are not: the term steps up at an election, so the text goes low
# after the marker, or (in the right half, to stay inside) high before it; staggered.
for k, e in enumerate(elections):
    at = mdates.date2num(pd.Timestamp(e["observed_at"]))  # a number: the text's y is in axes units
    for ax in (ax1, ax2):
        ax.axvline(at, color="purple", linestyle="-.", linewidth=1)
    ev = e.get("cause_event") or {}
    why = f" ({ev.get('kind')} {ev.get('member') or ev.get('source')})" if ev else ""
    before = at > sum(ax2.get_xlim()) / 2
    y = 0.95 - 0.14 * (k % 3) if before else 0.05 + 0.14 * (k % 3)
    ax2.annotate(f"term {e['term_from']}→{e['term_to']}: {e['cause']}{why}", (at, y),
                 xycoords=ax2.get_xaxis_transform(), xytext=(-4 if before else 4, 0), textcoords="offset points",
                 ha="right" if before else "left", va="top" if before else "bottom", fontsize=8, color="purple",
                 bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.8))
ax1.set_ylabel("leader changes seen (lines offset)")
ax2.set_ylabel("raft term")
ax1.legend(loc="upper left", fontsize=8)
ax1.set_title(f"{run_id}: counters and raft term ({env})")
fig.tight_layout()
fig.subplots_adjust(**MARGINS)
fig.savefig(FIG_DIR / "fig-counters.png", dpi=100)"""),
    ("code", """def states(d):
    # Per sample: 0 unreachable, 1 answering but unhealthy, 2 healthy.
    reachable = d["reachable"].astype(str).str.lower() == "true"
    healthy = d["health"].astype(str).str.lower() == "true"
    return (reachable.astype(int) * (1 + healthy.astype(int))).tolist()

COLOURS = {0: "#d62728", 1: "#ff7f0e", 2: "#2ca02c"}

def health_lanes(ax, x=same):
    # One bar per spell of one state, not per sample: a 20-minute run at 1 s has
    # thousands of samples, and a bar each made this the notebook's slowest figure.
    for i, m in enumerate(members):
        d = samples[samples["member"] == m].sort_values("ts")
        st, ts = states(d), [x(t) for t in d["ts"]]
        lefts, widths, colours, j = [], [], [], 0
        while j < len(ts) - 1:
            k = j
            while k + 1 < len(ts) - 1 and st[k + 1] == st[j]:
                k += 1
            lefts.append(ts[j]); widths.append(ts[k + 1] - ts[j]); colours.append(COLOURS[st[j]])
            j = k + 1
        if lefts:
            ax.barh([i] * len(lefts), widths, left=lefts, color=colours, height=0.6, linewidth=0)
    ax.set_yticks(range(len(members)), members)

# The canary lanes and the lock lane (if any) under the health lanes, on the same time axis.
lanes = ["write", "read"] if canary is not None else []
heights = [0.6 * len(members) + 0.6] + [1.7] * len(lanes) + ([lock_height()] if locks is not None else [])
fig_h = sum(heights) + 0.9 + legend_height()
fig, axes = plt.subplots(len(heights), 1, figsize=(11, fig_h), sharex=True, height_ratios=heights, squeeze=False)
axes = axes[:, 0]
health_lanes(axes[0])
for ax, kind in zip(axes[1:], lanes):
    canary_lane(ax, kind)
if locks is not None:
    lock_lane(axes[-1], XLIM)
for ax in axes:
    shade_windows(ax)
    mark_disruption(ax)
time_axis(axes[0])
axes[0].set_title("health per member: green healthy, orange answering but unhealthy, red unreachable")
fig.tight_layout(rect=(0, lane_legend(fig, fig_h), 1, 1))
fig.subplots_adjust(**MARGINS)
fig.savefig(FIG_DIR / "fig-swimlanes.png", dpi=100)"""),
    ("code", """def waterfall_from_instants(d):
    # Baselines written before `waterfall` existed: rebuild it from the instants they have.
    t0 = pd.Timestamp(d["requested_at"])
    pts = [("requested", t0)] + [(g["kind"], pd.Timestamp(g["at"])) for g in d.get("ground_truth", [])]
    pts += [(f"{k} (measured)", pd.Timestamp(d[f"{k}_at"])) for k in ("member_lost", "member_back") if d.get(f"{k}_at")]
    if d.get("healthy_at"):
        pts.append(("healthy_list (measured)", pd.Timestamp(d["healthy_at"])))
    pts.sort(key=lambda p: p[1])
    out, prev = [], t0
    for name, at in pts:
        out.append({"step": name, "at": at.isoformat(), "since_previous_s": (at - prev).total_seconds(), "since_request_s": (at - t0).total_seconds()})
        prev = at
    return out

def label_steps(steps):
    # A `k8s_event` step is the events.csv row of kind k8s_event written at the same instant
    # (`at` has ns, `ts` ms, truncated): its detail is "<type> <reason>: <message> ...".
    # Rows with the same ms are taken in write order, the target's own first.
    rows = events[events["kind"] == "k8s_event"]
    used, out = set(), []
    for s in steps:
        s = dict(s, label=s["step"])
        if s["step"] == "k8s_event" and s.get("at"):
            at = pd.Timestamp(s["at"])
            free = rows[~rows.index.isin(used)]
            cand = free[free["ts"] == at.floor("ms")]
            if cand.empty:
                cand = free[(free["ts"] - at).abs() <= pd.Timedelta(milliseconds=1)]
            cand = pd.concat([cand[cand["member"] == disruption.get("target")], cand[cand["member"] != disruption.get("target")]])
            if cand.empty:
                print(f"waterfall: no k8s_event row in events.csv at {s['at']}: step left as k8s_event")
            else:
                used.add(cand.index[0])
                words = str(cand.iloc[0]["detail"]).split(":")[0].split()
                if len(words) >= 2:
                    s["label"] = f"k8s_event: {words[1]}" + (f" ({words[0]})" if words[0] != "Normal" else "")
        out.append(s)
    return out

steps = label_steps(disruption.get("waterfall") or (waterfall_from_instants(disruption) if disruption else []))
fig, ax = plt.subplots(figsize=(11, 0.35 * max(len(steps), 1) + 1.5))
for i, s in enumerate(steps):
    start = s["since_request_s"] - s["since_previous_s"]
    ax.barh(i, max(s["since_previous_s"], 0.01), left=start, color="#4c72b0")
    ax.text(s["since_request_s"], i, f" {s['label']} (+{s['since_previous_s']:.2f} s)", va="center", fontsize=8)
ax.set_yticks([])
ax.invert_yaxis()
ax.set_xlabel("seconds since the disruption was requested")
ax.set_title(f"recovery waterfall: {disruption.get('method', 'no disruption')} of {disruption.get('target', '-')}")
fig.tight_layout()
fig.savefig(FIG_DIR / "fig-waterfall.png", dpi=100)"""),
    ("code", """# Member health per interval (health.csv, one row per member per interval, drawn at the
# interval's end). Thresholds: etcd docs (disk and backend guidance) and the etcd mixin
# alerts etcdHighFsyncDurations (warning) and etcdHighCommitDurations.
THRESHOLDS = {
    "wal_fsync_p99_s": [(0.010, "10 ms (etcd docs)"), (0.5, "0.5 s (etcd mixin warning)")],
    "backend_commit_p99_s": [(0.025, "25 ms (etcd docs)"), (0.25, "0.25 s (etcd mixin)")],
}

if health is None:
    print(f"no health.csv in {RUN_DIR.name} (recorded before member health existed): no fig-health.png")
else:
    fig, (ax1, ax2, ax3) = plt.subplots(3, 1, figsize=(11, 8), sharex=True, height_ratios=[2, 2, 1.2])
    for ax, col in ((ax1, "wal_fsync_p99_s"), (ax2, "backend_commit_p99_s")):
        for i, m in enumerate(members):
            d = health[health["member"] == m].sort_values("ts")
            # An empty cell is NaN: the line breaks there (a lone value is a lone marker).
            # Hollow markers of different shapes: members with the same value stay visible.
            ax.plot(d["ts"], d[col], marker="os^Dv"[i % 5], fillstyle="none", markersize=6, linewidth=1.2, label=m)
        for y, text in THRESHOLDS[col]:
            ax.axhline(y, color="gray", linestyle="--", linewidth=1)
            ax.annotate(text, (1, y), xycoords=ax.get_yaxis_transform(), xytext=(-4, 2), textcoords="offset points",
                        ha="right", va="bottom", fontsize=8, color="dimgray")
        ax.set_yscale("log")
        ax.set_ylim(top=max(ax.get_ylim()[1], 2 * THRESHOLDS[col][-1][0]))  # room for the top label
        ax.set_ylabel(col.replace("_s", " (s)"))
    # Counts per interval as a flat segment over the interval; members offset a little so
    # equal counts stay visible. No segment = not known in that interval.
    for i, m in enumerate(members):
        d = health[health["member"] == m]
        off = 0.06 * (i - (len(members) - 1) / 2)
        for col, style in (("heartbeat_send_failures", "-"), ("slow_applies", ":")):
            c = d.dropna(subset=[col])
            ax3.hlines(c[col] + off, c["interval_start"], c["ts"], color=f"C{i}", linestyle=style, linewidth=2)
    ax3.plot([], [], color="black", linestyle="-", label="heartbeat send failures")
    ax3.plot([], [], color="black", linestyle=":", label="slow applies")
    ax3.set_ylabel("per interval\\n(lines offset)")
    ax3.legend(loc="upper left", fontsize=8)
    for ax in (ax1, ax2, ax3):
        shade_windows(ax)
        mark_disruption(ax)
    ax1.legend(loc="upper left", fontsize=8)
    ax1.set_title(f"{run_id}: member health per interval ({env})")
    fig.tight_layout()
    fig.savefig(FIG_DIR / "fig-health.png", dpi=100)"""),
    ("code", """# The disruption close up: [request - 2 s, healthy list + 3 s], or the disruption window's
# start / end for an instant that is missing; x in seconds since the request.
dwin = next((w for w in baseline["windows"] if w["name"] == "disruption"), None)
T0 = pd.Timestamp(disruption.get("requested_at") or (dwin or {}).get("start") or samples["ts"].min())
lo = pd.Timestamp(disruption["requested_at"]) - pd.Timedelta(seconds=2) if disruption.get("requested_at") else pd.Timestamp(dwin["start"]) if dwin else samples["ts"].min()
hi = pd.Timestamp(disruption["healthy_at"]) + pd.Timedelta(seconds=3) if disruption.get("healthy_at") else pd.Timestamp(dwin["end"]) if dwin else samples["ts"].max()
for key, edge in (("requested_at", "start"), ("healthy_at", "end")):
    if not disruption.get(key):
        print(f"zoom: no disruption.{key}: the zoom {edge}s at the {edge} of {'the disruption window' if dwin else 'the run'}")

def rel(t):
    d = t - T0
    return d.dt.total_seconds() if isinstance(d, pd.Series) else d.total_seconds()

ZX = (rel(lo), rel(hi))
# Steps drawn where the wall clock puts them (the samples' clock); labelled with the time
# since the request the waterfall gives (from the monotonic clock).
in_view = [s for s in steps if s.get("at") and ZX[0] <= rel(pd.Timestamp(s["at"])) <= ZX[1]]
later = [s for s in steps if s.get("at") and rel(pd.Timestamp(s["at"])) > ZX[1]]

def step_colour(s):
    if s["step"].endswith("(measured)"):
        return "black"
    if s["step"].endswith("(canary)"):
        return "C0"
    if s["step"].startswith(("pod_", "k8s_event", "disruption_target", "eviction", "old_pod")):
        return "#8c564b"
    return "dimgray"

# Stagger: each label goes in the first row where it does not overlap a label already
# there (widths measured with the renderer, positions from the fixed axes width).
FIG_W, DPI = 11, 100
AX_PX = FIG_W * DPI * (MARGINS["right"] - MARGINS["left"])
_scratch = plt.figure(figsize=(FIG_W, 1), dpi=DPI)
_r = _scratch.canvas.get_renderer()
rows, placed = [], []
for s in in_view:
    text = f"{s['label']} +{s['since_request_s']:.3f} s"
    w = _scratch.text(0, 0, text, fontsize=7.5).get_window_extent(_r).width + 8
    px = (rel(pd.Timestamp(s["at"])) - ZX[0]) / (ZX[1] - ZX[0]) * AX_PX
    left = px + 3 + w <= AX_PX  # the text to the right of its marker, unless it would leave the axes
    x0, x1 = (px, px + w) if left else (px - w, px)
    row = next((k for k, r in enumerate(rows) if all(x1 < a or x0 > b for a, b in r)), len(rows))
    if row == len(rows):
        rows.append([])
    rows[row].append((x0, x1))
    placed.append((s, text, row, left))
plt.close(_scratch)

zl = ["write", "read"] if canary is not None else []
heights = [0.2 * max(len(rows), 1) + 0.25, 2.0, 2.0] + [1.7] * len(zl) + ([lock_height()] if locks is not None else [])
fig_h = sum(heights) + 1.3 + legend_height()
fig, axes = plt.subplots(len(heights), 1, figsize=(FIG_W, fig_h), sharex=True, height_ratios=heights)
band, ax1, ax2, lane_axes = axes[0], axes[1], axes[2], axes[3:]
for i, m in enumerate(members):
    d = samples[samples["member"] == m]
    off = 0.04 * (i - (len(members) - 1) / 2)
    c = d.dropna(subset=["leader_changes_seen_total"])
    ax1.step(rel(c["ts"]), c["leader_changes_seen_total"] + off, where="post", label=m, linewidth=1.5, marker=".", markersize=3)
    t = d.dropna(subset=["raft_term"])
    ax2.step(rel(t["ts"]), t["raft_term"] + off, where="post", label=m, linewidth=1.5, marker=".", markersize=3)
for ax, kind in zip(lane_axes, zl):
    canary_lane(ax, kind, x=rel)
if locks is not None:
    lock_lane(axes[-1], ZX, x=rel)
for ax in axes[1:]:
    shade_windows(ax, x=rel)
    for s, _, _, _ in placed:
        ax.axvline(rel(pd.Timestamp(s["at"])), color=step_colour(s), linestyle="--" if s["step"] == "requested" else "-", linewidth=0.8, alpha=0.6, zorder=1)
    for e in elections:
        if ZX[0] <= rel(pd.Timestamp(e["observed_at"])) <= ZX[1]:
            ax.axvline(rel(pd.Timestamp(e["observed_at"])), color="purple", linestyle="-.", linewidth=1, zorder=1)
# Labels top to bottom in the band, each on a tick down from its row to the panels.
band.set_ylim(max(len(rows), 1) - 0.4, -0.6)
band.axis("off")
for s, text, row, left in placed:
    at = rel(pd.Timestamp(s["at"]))
    band.plot([at, at], [row, max(len(rows), 1) - 0.4], color=step_colour(s), linewidth=0.6, alpha=0.6, clip_on=False)
    band.annotate(text, (at, row), xytext=(3 if left else -3, 0), textcoords="offset points", ha="left" if left else "right",
                  va="center", fontsize=7.5, color=step_colour(s), bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none"))
ax1.set_xlim(ZX)
ax1.set_ylabel("leader changes seen\\n(lines offset)")
ax2.set_ylabel("raft term")
ax1.legend(loc="upper left", fontsize=8)
since = "the disruption was requested" if disruption.get("requested_at") else "the disruption window started" if dwin else "the run started"
xlabel = f"seconds since {since} ({T0.strftime('%Y-%m-%d %H:%M:%S.%f')[:-3]} UTC)"
if later:  # steps after the zoom (Kubernetes may call the pod Ready long after the healthy list)
    xlabel += "\\nlater waterfall steps: " + ", ".join(f"{s['label']} +{s['since_request_s']:.1f} s" for s in later)
axes[-1].set_xlabel(xlabel)
what = f"{disruption.get('method')} of {disruption.get('target')}" if disruption else "no disruption recorded"
band.set_title(f"{run_id}: {what}, close up ({env})\\n"
               "waterfall steps: black measured, blue canary, brown Kubernetes, grey the disruptor; purple -.- an election", fontsize=10)
fig.tight_layout(h_pad=0.3, rect=(0, lane_legend(fig, fig_h), 1, 1))
fig.subplots_adjust(**MARGINS)
fig.savefig(FIG_DIR / "fig-zoom.png", dpi=DPI)
print(sorted(p.name for p in FIG_DIR.glob("fig-*.png")))"""),
]

nb = nbf.v4.new_notebook()
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in CELLS]
for i, c in enumerate(nb.cells):
    c["id"] = f"cell-{i}"  # stable ids: regenerating changes nothing
nbf.write(nb, str(__import__("pathlib").Path(__file__).with_name("baseline.ipynb")))
