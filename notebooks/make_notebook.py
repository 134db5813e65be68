"""Writes notebooks/baseline.ipynb from the cells below (outputs stripped).

The notebook is generated so that its source stays reviewable as plain Python; edit the
cells here and run: .tools/venv/bin/python notebooks/make_notebook.py
"""
import nbformat as nbf

CELLS = [
    ("md", """# leaderwatch baseline: one run, four figures

Given a run directory (`RUN_DIR`, default: the committed leader rehearsal), draws

1. `fig-counters.png`: each member's `etcd_server_leader_changes_seen_total` and the raft
   term over time, windows shaded, the disruption and the disruptor's / Kubernetes' events
   marked, and each election marked at the moment it was observed with its term change and
   cause (`elections_detail` in `baseline.json`, schema 3 on);
2. `fig-swimlanes.png`: health and reachability swimlanes per member;
3. `fig-waterfall.png`: the recovery waterfall (gaps between the recovery steps as bars);
4. `fig-health.png`: member health per interval from `health.csv`: WAL fsync p99 and
   backend commit p99 per member against the thresholds etcd documents (10 ms / 25 ms) and
   the etcd mixin alerts on (0.5 s / 0.25 s), and the heartbeat send failures and slow
   applies per interval. A missing value (no observation in the interval) is a gap, never 0.

The PNGs go next to the run's data (or to `FIG_DIR`). It runs unchanged on a local
rehearsal and on a Kubernetes run: it reads only `samples.csv`, `events.csv`,
`baseline.json` and `health.csv` (formats in `data/README.md`). Runs recorded before
`health.csv` and election causes existed (baseline.json schema 2) get the first three
figures, without causes; the notebook says so."""),
    ("code", """import json, os, pathlib
import matplotlib
matplotlib.use("Agg")
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
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
events = events[events["run_id"] == run_id].sort_values("ts")
env = baseline["environment"]["description"]
disruption = baseline.get("disruption") or {}
members = sorted(samples["member"].unique())
# Schema 3 on: every election with its cause; older runs have none.
elections = [e for w in baseline["windows"] for e in w.get("elections_detail") or []]
health = None
if (RUN_DIR / "health.csv").exists():
    health = pd.read_csv(RUN_DIR / "health.csv", parse_dates=["ts", "interval_start"])
    health = health[health["run_id"] == run_id]
print(RUN_DIR.name, "|", env, "|", len(samples), "rows,", len(members), "members")
if any("elections_detail" in w for w in baseline["windows"]):
    print("elections:", ", ".join(f"term {e['term_from']}->{e['term_to']} {e['cause']}" for e in elections) or "none")
else:
    print(f"elections: causes not recorded (baseline.json schema {baseline.get('schema_version')})")"""),
    ("code", """WINDOW_COLOURS = {"at_rest": "#e8f1fb", "disruption": "#fde8e8", "settle": "#eaf7ea"}

def shade_windows(ax):
    for w in baseline["windows"]:
        ax.axvspan(pd.Timestamp(w["start"]), pd.Timestamp(w["end"]), color=WINDOW_COLOURS.get(w["name"], "#eee"), zorder=0)

def mark_disruption(ax):
    for key, style in (("requested_at", "--"), ("healthy_at", ":")):
        if disruption.get(key):
            ax.axvline(pd.Timestamp(disruption[key]), color="black", linestyle=style, linewidth=1)

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
fig.savefig(FIG_DIR / "fig-counters.png", dpi=100)"""),
    ("code", """def state(r):
    if r["reachable"] is not True and str(r["reachable"]).lower() != "true":
        return 0  # unreachable
    return 2 if str(r["health"]).lower() == "true" else 1

COLOURS = {0: "#d62728", 1: "#ff7f0e", 2: "#2ca02c"}
fig, ax = plt.subplots(figsize=(11, 0.6 * len(members) + 1.5))
for i, m in enumerate(members):
    d = samples[samples["member"] == m].sort_values("ts")
    st = d.apply(state, axis=1).tolist()
    ts = d["ts"].tolist()
    for j in range(len(ts) - 1):
        ax.barh(i, ts[j + 1] - ts[j], left=ts[j], color=COLOURS[st[j]], height=0.6, linewidth=0)
shade_windows(ax)
mark_disruption(ax)
ax.set_yticks(range(len(members)), members)
ax.set_title("health per member: green healthy, orange answering but unhealthy, red unreachable")
fig.tight_layout()
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
        out.append({"step": name, "since_previous_s": (at - prev).total_seconds(), "since_request_s": (at - t0).total_seconds()})
        prev = at
    return out

steps = disruption.get("waterfall") or (waterfall_from_instants(disruption) if disruption else [])
fig, ax = plt.subplots(figsize=(11, 0.35 * max(len(steps), 1) + 1.5))
for i, s in enumerate(steps):
    start = s["since_request_s"] - s["since_previous_s"]
    ax.barh(i, max(s["since_previous_s"], 0.01), left=start, color="#4c72b0")
    ax.text(s["since_request_s"], i, f" {s['step']} (+{s['since_previous_s']:.2f} s)", va="center", fontsize=8)
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
    fig.savefig(FIG_DIR / "fig-health.png", dpi=100)
print(sorted(p.name for p in FIG_DIR.glob("fig-*.png")))"""),
]

nb = nbf.v4.new_notebook()
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in CELLS]
for i, c in enumerate(nb.cells):
    c["id"] = f"cell-{i}"  # stable ids: regenerating changes nothing
nbf.write(nb, str(__import__("pathlib").Path(__file__).with_name("baseline.ipynb")))
