"""Time CCI's exact fast path against the naive K + 1 separate forward passes.

ViT-B/16 image-tower geometry (224 px, 197 tokens, 12 layers, width 768, 12 heads),
random weights built from an open_clip config (no download), K = 7 by default.

* naive: one unmasked forward (its final tokens are clustered) plus K separate forwards,
  batch 1 each, with cluster k's keys masked through :class:`ClusterMask` (the reference
  hook on the model's own forward);
* fast: :meth:`ConceptClusterImportance.embed` with ``method="fast"`` (token deletion,
  shared first projection, CLS-only last layer with keys and values folded away, variants
  packed in groups of ~512 tokens on the CPU);
* hook-batched: the reference path with the K variants stacked into one batch;
* floor: K + 1 plain unmasked forwards of the model (no mask, no k-means), the least any
  pass-per-variant method can cost.

Both naive and fast include the k-means step. The script checks that fast and naive give
the same masked embeddings (max abs difference printed) and prints the ratio
``fast / naive`` (target <= 0.75 on CPU, <= 0.35 on a GPU) and the analytic FLOP ratio.

Wall-clock and process CPU time are both reported (CPU time is the steadier of the two
on a shared machine; with several threads it also counts spin-waiting).

Usage: ``python benchmarks/bench_cci.py [--device cuda] [--images 1] [--repeats 5] [--threads 1]``
"""

from __future__ import annotations

import argparse
import statistics
import time


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def naive_masked_embeddings(cci, pixel_values):
    """K + 1 separate batch-1 forwards per image; returns ``(B, K, E)``."""
    import torch

    from concept_grounding.cci.clusters import kmeans
    from concept_grounding.cci.fast import cluster_key_mask
    from concept_grounding.cci.hook import ClusterMask

    be = cci.backend
    out = []
    for i in range(pixel_values.shape[0]):
        px = pixel_values[i : i + 1]
        tokens = be.run_encoder(be.embed(px))
        be.pool(tokens)
        labels, _ = kmeans(be.final_norm(tokens[:, 1:]), cci.num_clusters, seed=cci.seed, max_iter=cci.kmeans_iters)
        mask = cluster_key_mask(labels, cci.num_clusters)
        zs = []
        for k in range(cci.num_clusters):
            with ClusterMask(be, mask[k : k + 1]):
                zs.append(be.encode_image(px))
        out.append(torch.cat(zs))
    return torch.stack(out)


def flop_ratio(t: int, n: int, d: int, layers: int, k: int, heads: int = 12) -> float:
    """Analytic multiply-add ratio fast / naive (linear maps + attention), even clusters."""
    lin = 12 * d * d  # qkv 3, out 1, mlp 8 (per token, per layer)
    att = lambda length: 2 * length * d  # noqa: E731  (QK^T and AV, per query)
    naive = (k + 1) * layers * t * (lin + att(t))
    lens = [t - n // k] * k
    fast = layers * t * (lin + att(t))  # unmasked pass
    for length in lens:
        fast += length * (9 * d * d + att(length))  # layer 1 without qkv
        fast += (layers - 2) * length * (lin + att(length))
        # last layer: CLS q, out, mlp (10 d^2) + keys/values folded into q and the weights (2 d^2),
        # then 2 H d per token for the logits and the weighted token sums
        fast += 12 * d * d + length * 2 * heads * d
    return fast / naive


def main(argv: list[str] | None = None) -> int:
    import torch

    from concept_grounding.cci import ConceptClusterImportance
    from concept_grounding.cci.tiny import vit_b16_open_clip_visual

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--images", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--with-hook", action="store_true", help="also time the batched hook path")
    ap.add_argument("--clusters", type=int, default=7)
    ap.add_argument("--batch-size", type=int, default=8, help="images per fast-path chunk")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    model = vit_b16_open_clip_visual().to(args.device)
    cci = ConceptClusterImportance(model, num_clusters=args.clusters, batch_size=args.batch_size)
    hook = ConceptClusterImportance(model, num_clusters=args.clusters, batch_size=args.batch_size, method="hook")
    gen = torch.Generator().manual_seed(0)
    px = torch.randn(args.images, 3, 224, 224, generator=gen).to(args.device)

    fns = {
        "fast": lambda: cci.embed(px),
        "naive": lambda: naive_masked_embeddings(cci, px),
        "plain": lambda: [model(px[i : i + 1]) for i in range(px.shape[0]) for _ in range(args.clusters + 1)],
    }
    if args.with_hook:
        fns["hook"] = lambda: hook.embed(px)
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    results = {}
    for rep in range(args.repeats + 1):  # round 0 is warm-up; rounds interleave the methods
        for name, fn in fns.items():
            _sync(args.device)
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.inference_mode():
                results[name] = fn()
            _sync(args.device)
            if rep > 0:
                wall[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
    # the minimum over rounds is the least disturbed by other load on a shared machine
    t_fast, t_naive, t_plain = (min(wall[n]) for n in ("fast", "naive", "plain"))
    c_fast, c_naive, c_plain = (min(cpu[n]) for n in ("fast", "naive", "plain"))
    emb, zk_naive = results["fast"], results["naive"]
    err = (emb.masked_embeds - zk_naive).abs().max().item()
    b = args.images
    print(f"device={args.device} images={b} K={args.clusters} tokens=197 layers=12 width=768 "
          f"threads={torch.get_num_threads()} rounds={args.repeats} (min over rounds)")
    print(f"naive (K+1 separate passes):        wall {t_naive / b * 1e3:8.1f} ms/image   cpu {c_naive / b * 1e3:8.1f} ms/image")
    print(f"floor: K+1 plain unmasked forwards: wall {t_plain / b * 1e3:8.1f} ms/image   cpu {c_plain / b * 1e3:8.1f} ms/image")
    if args.with_hook:
        print(f"hook, K variants batched:           wall {min(wall['hook']) / b * 1e3:8.1f} ms/image")
    print(f"fast (exact deletion path):         wall {t_fast / b * 1e3:8.1f} ms/image   cpu {c_fast / b * 1e3:8.1f} ms/image")
    print(f"max |z_k fast - z_k naive| = {err:.2e}")
    print(f"analytic FLOP ratio fast/naive = {flop_ratio(197, 196, 768, 12, args.clusters):.3f}")
    print(f"median wall ratio fast/naive = {statistics.median(f / n for f, n in zip(wall['fast'], wall['naive'])):.3f}")
    print(f"cpu-time ratio fast/naive = {c_fast / c_naive:.3f}   fast/(K+1 plain) = {c_fast / c_plain:.3f}")
    print(f"wall ratio fast/(K+1 plain forwards) = {t_fast / t_plain:.3f}")
    print(f"ratio fast/naive = {t_fast / t_naive:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
