"""Writes notebooks/baseline.ipynb from the cells below (outputs stripped).

The notebook is generated so that its source stays reviewable as plain Python; edit the
cells here and run: .tools/venv/bin/python notebooks/make_notebook.py
"""
import nbformat as nbf

CELLS = [
    ("md", """# leaderwatch baseline: one run, three figures

Given a run directory (`RUN_DIR`, default: the committed leader rehearsal), draws

1. each member's `etcd_server_leader_changes_seen_total` and the raft term over time,
   windows shaded, the disruption and the disruptor's / Kubernetes' events marked;
2. health and reachability swimlanes per member;
3. the recovery waterfall (gaps between the recovery steps as bars).

The PNGs go next to the run's data (or to `FIG_DIR`). It runs unchanged on a local
rehearsal and on a Kubernetes run: it reads only `samples.csv`, `events.csv` and
`baseline.json` (formats in `data/README.md`)."""),
    ("code", """import json, os, pathlib
import matplotlib
matplotlib.use("Agg")
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
print(RUN_DIR.name, "|", env, "|", len(samples), "rows,", len(members), "members")"""),
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
fig.savefig(FIG_DIR / "fig-waterfall.png", dpi=100)
print(sorted(p.name for p in FIG_DIR.glob("fig-*.png")))"""),
]

nb = nbf.v4.new_notebook()
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in CELLS]
for i, c in enumerate(nb.cells):
    c["id"] = f"cell-{i}"  # stable ids: regenerating changes nothing
nbf.write(nb, str(__import__("pathlib").Path(__file__).with_name("baseline.ipynb")))
