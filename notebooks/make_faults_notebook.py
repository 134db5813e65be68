"""Writes notebooks/faults.ipynb from the cells below (outputs stripped).

Edit the cells here and run: .tools/venv/bin/python notebooks/make_faults_notebook.py
"""
import nbformat as nbf

CELLS = [
    ("md", """# Faults below etcd: the fsync sweep and the confusion matrix

Given the runs of `lab/fault-runs.sh` (local cluster, real nodes, injected fault):

1. `SWEEP_DIR` (default: the newest `data/fault-sweep-*`): one `leaderwatch sample` per
   added fsync latency (`lw-lab fault disk`) on the leader of the moment and on all three
   members. Draws `fig-fsync-sweep.png`: elections per hour against the added latency with
   `leaderwatch rate`'s exact Poisson 95% interval (each point's `rate.json`), and the
   write canary's p99 latency (the commit a client waits for) and the share of its writes
   that failed (deadline 1 s). Prints the table docs/results.md carries.
2. `REPEAT_DIR` (default: the newest `data/fault-repeat-*`): each fault injected several
   times under a sample of its own. Prints the confusion matrix: the injected fault (from
   the harness's `faults.csv`, which leaderwatch never reads) against the cause leaderwatch
   gave each election (its `events.csv`), an election belonging to the fault whose span
   (from its injection to 10 s after its clearing) holds it.
3. `NODE_DIR` (default: the newest `data/fault-node-*`): the leader's node lost
   (`lw-lab fault node-loss`) several times past the node controller's grace period, and
   once past the pods' 300 s toleration. Its elections join the confusion matrix; prints
   what the control plane did after each loss (`control-plane.csv`, read every 5 s): when
   the node was NotReady, when the taint deleted the member's pod, what the PDB allowed.

The PNG goes to `FIG_DIR` (default: `SWEEP_DIR`)."""),
    ("code", """import json, os, pathlib
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

ROOT = pathlib.Path.cwd() if (pathlib.Path.cwd() / "data").exists() else pathlib.Path.cwd().parent
def newest(pattern):
    found = sorted((ROOT / "data").glob(pattern))
    return found[-1] if found else None
SWEEP_DIR = pathlib.Path(os.environ.get("SWEEP_DIR") or newest("fault-sweep-*"))
REPEAT_DIR = os.environ.get("REPEAT_DIR") or newest("fault-repeat-*")
NODE_DIR = os.environ.get("NODE_DIR") or newest("fault-node-*")
FIG_DIR = pathlib.Path(os.environ.get("FIG_DIR") or SWEEP_DIR)
FIG_DIR.mkdir(parents=True, exist_ok=True)

# A DataFrame as a Markdown table (numbers to one decimal), as docs/results.md has it.
def md(df, index=True):
    d = df.reset_index() if index else df
    cell = lambda v: f"{v:.1f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(map(str, d.columns)) + " |", "|" + "---|" * len(d.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in d.itertuples(index=False)]
    return "\\n".join(lines)

print("environment:", (SWEEP_DIR / "ENVIRONMENT").read_text().strip())"""),
    ("code", """# One row per sweep point: the added latency, on whom, the rate with its interval, and
# the canary's writes while the fault was in force.
points = pd.read_csv(SWEEP_DIR / "points.csv", parse_dates=["from", "to"]).rename(columns={"from": "start", "to": "end"})
rows = []
for p in points.itertuples():
    run = SWEEP_DIR / p.run
    rate = json.loads((run / "rate.json").read_text())
    delay_ms = float(p.run.split("-")[1].removesuffix("ms"))
    on = "none" if delay_ms == 0 else p.run.split("-")[2]
    canary = pd.read_csv(run / "canary.csv", parse_dates=["started"])
    w = canary[(canary["kind"] == "write") & (canary["started"] >= p.start) & (canary["started"] <= p.end)]
    ok = w[w["ok"] == True]
    rows.append({
        "added fsync ms": delay_ms, "on": on,
        "exposure s": round(rate["exposure_s"]), "elections": rate["residual"],
        "per hour": rate["per_hour"]["rate"], "lower": rate["per_hour"]["lower"],
        "upper": rate["per_hour"]["upper"],
        "write p99 ms": ok["latency_ms"].quantile(0.99) if len(ok) else float("nan"),
        "writes failed %": 100 * (1 - len(ok) / len(w)) if len(w) else float("nan"),
    })
sweep = pd.DataFrame(rows).sort_values(["on", "added fsync ms"])
print(md(sweep, index=False))"""),
    ("code", """fig, (a, b) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
base = sweep[sweep["on"] == "none"]
for on, colour in (("leader", "tab:red"), ("all", "tab:blue")):
    d = pd.concat([base, sweep[sweep["on"] == on]]).sort_values("added fsync ms")
    x = d["added fsync ms"].clip(lower=0.5)  # 0 ms drawn at 0.5 on the log axis
    a.errorbar(x, d["per hour"], yerr=[d["per hour"] - d["lower"], d["upper"] - d["per hour"]],
               fmt="o-", color=colour, capsize=3, label=f"on {'the leader' if on == 'leader' else 'all three'}")
    b.plot(x, d["write p99 ms"], "o-", color=colour)
    for xi, f, p99 in zip(x, d["writes failed %"], d["write p99 ms"]):
        if f > 0:
            b.annotate(f"{f:.0f}% failed", (xi, p99), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
a.set_xscale("log")
a.set_ylabel("elections per hour\\n(exact 95% interval)")
a.legend()
a.set_title("Added fsync latency under one member's volume or all three (lw-slowfs)")
b.set_yscale("log")
b.set_ylabel("write canary p99 (ms)")
b.set_xlabel("added latency per fsync (ms; 0 drawn at 0.5)")
for ax in (a, b):
    ax.grid(True, which="both", alpha=0.3)
fig.tight_layout()
fig.savefig(FIG_DIR / "fig-fsync-sweep.png", dpi=100)
print(sorted(p.name for p in FIG_DIR.glob("fig-*.png")))"""),
    ("code", """# The confusion matrix: injected fault x attributed cause, counts, over the repeat
# and node runs.
dirs = [pathlib.Path(d) for d in (REPEAT_DIR, NODE_DIR) if d]
if not dirs:
    print("no data/fault-repeat-* or data/fault-node-* run: no confusion matrix")
else:
    spans, cells = [], {}
    for rd in dirs:
        truth = pd.read_csv(rd / "faults.csv", parse_dates=["ts"])
        mine = []
        for r in truth[truth["act"] == "inject"].itertuples():
            clear = truth[(truth["act"] == "clear") & (truth["fault"] == r.fault) & (truth["ts"] > r.ts)]["ts"].min()
            name = r.fault if r.fault.startswith(("partition", "node")) else r.fault.split("-")[0]
            mine.append((name, r.ts, clear + pd.Timedelta(seconds=10)))
        spans += mine
        for ev in sorted(rd.glob("*/events.csv")):
            e = pd.read_csv(ev, parse_dates=["ts"], keep_default_na=False)
            # An election_revised row (leaderwatch recount) is the last word on its terms.
            el = e[e["kind"].isin(["election", "election_revised"])]
            el = el.drop_duplicates(subset=["term_from", "term_to"], keep="last")
            for x in el.itertuples():
                fault = next((f for f, a0, a1 in mine if a0 <= x.ts <= a1), "no fault")
                cells[(fault, x.cause)] = cells.get((fault, x.cause), 0) + 1
    m = pd.Series(cells).unstack(fill_value=0) if cells else pd.DataFrame()
    # How many times each fault was injected: a fault that caused no election shows here.
    injected = pd.Series([f for f, _, _ in spans]).value_counts()
    m = m.reindex(m.index.union(injected.index), fill_value=0)
    m.insert(0, "injections", injected.reindex(m.index).fillna(0).astype(int))
    m.index.name = "injected \\\\ attributed"
    print(md(m))"""),
    ("code", """# A lost node as the control plane saw it: per injection (points.csv), seconds from the
# loss to the first read with the node not Ready, to the first with the member's pod
# deleting (the taint), and to the fault's clearing; the PDB's allowed disruptions
# between NotReady and the clearing; whether the pod was replaced before the clearing.
if NODE_DIR is None:
    print("no data/fault-node-* run")
else:
    nd = pathlib.Path(NODE_DIR)
    truth = pd.read_csv(nd / "faults.csv", parse_dates=["ts"])
    rows = []
    for r in truth[truth["act"] == "inject"].itertuples():
        cleared = truth[(truth["act"] == "clear") & (truth["ts"] > r.ts)]["ts"].min()
        run = next(p for p in sorted(nd.glob("*/control-plane.csv"))
                   if pd.read_csv(p, parse_dates=["ts"])["ts"].between(r.ts, cleared).any())
        cp = pd.read_csv(run, parse_dates=["ts"], keep_default_na=False)
        cp = cp[(cp["ts"] >= r.ts) & (cp["ts"] <= cleared) & (cp["pod"] == r.member)]
        since = lambda t: f"{(t - r.ts).total_seconds():.1f}" if pd.notna(t) else "-"
        not_ready = cp[cp["node_ready"] != "True"]["ts"].min()
        deleting = cp[cp["pod_deleting"] != ""]["ts"].min()
        after = cp[cp["ts"] >= not_ready] if pd.notna(not_ready) else cp.iloc[0:0]
        rows.append({"run": run.parent.name, "node": r.node, "member": r.member,
                     "NotReady after s": since(not_ready), "pod deleted after s": since(deleting),
                     "cleared after s": since(cleared),
                     "PDB allowed": "/".join(sorted({str(v) for v in after["pdb_allowed"]})) or "-"})
    print(md(pd.DataFrame(rows), index=False))"""),
]

nb = nbf.v4.new_notebook()
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in CELLS]
for i, c in enumerate(nb.cells):
    c["id"] = f"cell-{i}"  # stable ids: regenerating changes nothing
nbf.write(nb, str(__import__("pathlib").Path(__file__).with_name("faults.ipynb")))
